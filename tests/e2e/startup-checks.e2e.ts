import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { shippedMigrations } from '@agentrun/persistence';
import { promisify } from 'node:util';
import { Client as PgClient } from 'pg';
import { SEARCH_ATTRIBUTES } from '@agentrun/contracts';
import { freshDatabase } from '../support/database';
import { freePort } from '../support/platform';
import { REPO_ROOT, stackUrls } from '../support/stack-env';
import { waitFor } from '../support/wait';
import { temporalCli } from '../support/workflow-env';

const run = promisify(execFile);

/**
 * What a service does at startup against a database or a Temporal namespace it cannot use: it exits
 * non-zero with one message saying what to run, instead of failing later on the first query or
 * workflow task. The snapshotter stands in for every service: it has both a database and workers.
 */

interface Started {
  child: ChildProcess;
  port: number;
  output: () => string;
  exit: Promise<number | null>;
}

async function startSnapshotter(env: Record<string, string>): Promise<Started> {
  const main = join(REPO_ROOT, 'apps/snapshotter/dist/main.js');
  if (!existsSync(main)) throw new Error(`${main} is missing: run npm run build first`);
  const port = await freePort();
  const dataDir = join(REPO_ROOT, '.stack', 'test-runs', `startup-${randomBytes(3).toString('hex')}`);
  const child = spawn(process.execPath, [main], {
    env: {
      PATH: process.env.PATH ?? '',
      AGENTRUN_MODE: 'local',
      TEMPORAL_ADDRESS: stackUrls().temporalAddress,
      TEMPORAL_NAMESPACE: stackUrls().namespace,
      AGENTRUN_TASK_QUEUE_PREFIX: `startup-${randomBytes(3).toString('hex')}.`,
      WORKSPACE_ROOT: join(dataDir, 'workspaces'),
      OBJECT_STORE_DIR: join(dataDir, 'objects'),
      SNAPSHOTTER_PORT: String(port),
      SHUTDOWN_GRACE_MS: '10000',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code, signal) => resolve(code ?? (signal ? -1 : null))));
  return { child, port, output: () => output, exit };
}

async function ready(started: Started): Promise<void> {
  const state = await waitFor(
    'the snapshotter to be ready',
    async () => {
      if (started.child.exitCode !== null) return 'exited';
      const res = await fetch(`http://127.0.0.1:${started.port}/readyz`);
      return res.status === 200 && 'ready';
    },
    60_000,
    200,
  );
  if (state === 'exited') throw new Error(`the snapshotter exited while starting:\n${started.output()}`);
}

async function stop(started: Started): Promise<number | null> {
  if (started.child.exitCode === null && started.child.signalCode === null) started.child.kill('SIGTERM');
  return started.exit;
}

async function migrateCommand(databaseUrl: string): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [join(REPO_ROOT, 'tools/migrate.js')], { env: { PATH: process.env.PATH ?? '', DATABASE_URL: databaseUrl } });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('the schema check (DATABASE_MIGRATE=check)', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  const started: Started[] = [];

  beforeAll(async () => {
    db = await freshDatabase();
  });
  afterAll(async () => {
    for (const s of started) await stop(s);
    await db?.drop();
  });

  it('refuses an empty database with one message naming the migration step, and starts once npm run migrate has run', async () => {
    const refused = await startSnapshotter({ DATABASE_URL: db.url, DATABASE_MIGRATE: 'check', TEMPORAL_CHECK_SEARCH_ATTRIBUTES: 'false' });
    started.push(refused);
    expect(await refused.exit).toBe(1);
    expect(refused.output()).toContain(`the database schema is at empty (no migrations applied), this build needs ${shippedMigrations().at(-1)}`);
    expect(refused.output()).toContain('run `npm run migrate`');

    // It took no lock and ran no DDL: the database is still empty.
    const pg = new PgClient({ connectionString: db.url });
    await pg.connect();
    try {
      expect((await pg.query("SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'")).rows[0].n).toBe(0);

      const first = await migrateCommand(db.url);
      expect(first).toMatchObject({ code: 0 });
      expect(first.stdout).toContain('migrate: applied ReadModel1764400000000, CommandLedgerClaims1764500000000');
      const again = await migrateCommand(db.url);
      expect(again.stdout).toContain('migrate: nothing to apply');

      // A migration from a newer build (a rolling deploy) is allowed with a warning.
      await pg.query(`INSERT INTO migrations ("timestamp", name) VALUES (1999999999999, 'FromANewerBuild1999999999999')`);
    } finally {
      await pg.end();
    }

    const current = await startSnapshotter({ DATABASE_URL: db.url, DATABASE_MIGRATE: 'check' });
    started.push(current);
    await ready(current);
    expect(current.output()).toContain('FromANewerBuild1999999999999');
    expect(await stop(current)).toBe(0);
  });

  it('npm run migrate exits non-zero with the server named when it cannot connect', async () => {
    const port = await freePort();
    const result = await migrateCommand(`postgres://agentrun:agentrun@127.0.0.1:${port}/agentrun`);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`migrate: cannot connect to postgres://agentrun:***@127.0.0.1:${port}/agentrun`);
  });
});

describe('the Temporal namespace check', () => {
  const cli = temporalCli();
  const address = stackUrls().temporalAddress;
  const namespace = `agentrun-startup-${randomBytes(4).toString('hex')}`;
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  const started: Started[] = [];

  beforeAll(async () => {
    db = await freshDatabase();
    await run(cli, ['operator', 'namespace', 'create', '--address', address, '--namespace', namespace]);
    // One attribute is there already, so the message must list exactly the others.
    await run(cli, ['operator', 'search-attribute', 'create', '--address', address, '--namespace', namespace, '--name', 'AgentStatus', '--type', 'Keyword']);
  });
  afterAll(async () => {
    for (const s of started) await stop(s);
    await db?.drop();
    await run(cli, ['operator', 'namespace', 'delete', '--address', address, '--namespace', namespace, '--yes']).catch(() => undefined);
  });

  it('names the missing search attributes and the commands that create them; after running those commands the service starts', async () => {
    const refused = await startSnapshotter({ DATABASE_URL: db.url, TEMPORAL_NAMESPACE: namespace });
    started.push(refused);
    expect(await refused.exit).toBe(1);
    const output = refused.output();
    const missing = Object.entries(SEARCH_ATTRIBUTES).filter(([name]) => name !== 'AgentStatus');
    expect(output).toContain(`Temporal namespace '${namespace}' at ${address} lacks search attributes the workflows set:`);
    expect(output).toContain(`missing: ${missing.map(([name, type]) => `${name} (${type})`).join(', ')}`);

    const commands = output.split('\n').filter((line) => line.trim().startsWith('temporal operator search-attribute create')).map((line) => line.trim());
    expect(commands).toEqual(
      missing.map(([name, type]) => `temporal operator search-attribute create --address ${address} --namespace ${namespace} --name ${name} --type ${type}`),
    );
    for (const command of commands) await run(cli, command.split(' ').slice(1));
    // The server applies new attributes to a namespace through its caches: wait until it lists them all.
    await waitFor('the namespace to list every search attribute', async () => {
      const { stdout } = await run(cli, ['operator', 'search-attribute', 'list', '--address', address, '--namespace', namespace, '-o', 'json']);
      const listed = (JSON.parse(stdout) as { customAttributes?: Record<string, string> }).customAttributes ?? {};
      return Object.keys(SEARCH_ATTRIBUTES).every((name) => name in listed);
    }, 60_000, 500);

    const current = await startSnapshotter({ DATABASE_URL: db.url, TEMPORAL_NAMESPACE: namespace });
    started.push(current);
    await ready(current);
    expect(await stop(current)).toBe(0);
  });

  it('says a namespace does not exist and how to create it', async () => {
    const absent = `${namespace}-absent`;
    const refused = await startSnapshotter({ DATABASE_URL: db.url, TEMPORAL_NAMESPACE: absent });
    started.push(refused);
    expect(await refused.exit).toBe(1);
    expect(refused.output()).toContain(
      `Temporal namespace '${absent}' does not exist at ${address} (TEMPORAL_NAMESPACE): create it with \`temporal operator namespace create --address ${address} --namespace ${absent}\``,
    );
  });

  it('gives up on an address where no server answers within a bounded time, naming TEMPORAL_ADDRESS', async () => {
    const port = await freePort();
    const startedAt = Date.now();
    const refused = await startSnapshotter({ DATABASE_URL: db.url, TEMPORAL_ADDRESS: `127.0.0.1:${port}` });
    started.push(refused);
    expect(await refused.exit).toBe(1);
    expect(Date.now() - startedAt).toBeLessThan(60_000);
    expect(refused.output()).toContain(`cannot connect to Temporal at 127.0.0.1:${port} in plaintext`);
    expect(refused.output()).toContain('check TEMPORAL_ADDRESS');
  });
});
