jest.setTimeout(180_000);
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ConfigResourceTypes, Kafka, logLevel } from 'kafkajs';
import { Client as PgClient } from 'pg';
import { TOPICS } from '@agentrun/contracts';
import { freePort } from '../support/platform';
import { REPO_ROOT, stackUrls } from '../support/stack-env';
import { waitFor } from '../support/wait';

const run = promisify(execFile);

/** Runs `npm run topics -- <command>` as an operator would (the built tool, no ts-node); returns its exit code and output. */
async function topics(command: 'apply' | 'check', env: Record<string, string>): Promise<{ code: number; out: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [join(REPO_ROOT, 'tools/topics.js'), command], { cwd: REPO_ROOT, env: { PATH: process.env.PATH ?? '', ...env } });
    return { code: 0, out: stdout + stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? -1, out: (e.stdout ?? '') + (e.stderr ?? '') };
  }
}

describe('topics declared once: npm run topics -- apply | check, and the startup check', () => {
  const urls = stackUrls();
  const id = `k${randomBytes(4).toString('hex')}`;
  const prefix = `${id}.`;
  const database = `agentrun_${id}`;
  // The local stack's profile: one broker, so one replica.
  const settings = {
    KAFKA_BROKERS: urls.kafkaBrokers.join(','),
    AGENTRUN_TOPIC_PREFIX: prefix,
    KAFKA_TOPIC_PARTITIONS: '3',
    KAFKA_REPLICATION_FACTOR: '1',
    KAFKA_MIN_INSYNC_REPLICAS: '1',
  };
  const names = Object.values(TOPICS).map((t) => prefix + t);
  const kafka = new Kafka({ clientId: `e2e-${id}`, brokers: urls.kafkaBrokers, logLevel: logLevel.NOTHING });
  const admin = kafka.admin();

  beforeAll(async () => {
    await admin.connect();
    const pg = new PgClient({ connectionString: urls.databaseUrl() });
    await pg.connect();
    await pg.query(`CREATE DATABASE ${database}`);
    await pg.end();
  });

  afterAll(async () => {
    const existing = new Set(await admin.listTopics());
    const ours = names.filter((n) => existing.has(n));
    if (ours.length) await admin.deleteTopics({ topics: ours });
    await admin.disconnect();
    const pg = new PgClient({ connectionString: urls.databaseUrl() });
    await pg.connect();
    await pg.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await pg.end();
  });

  /** Starts the projector on this prefix; resolves with its exit code and output, or 'ready' once /readyz answers 200. */
  async function startProjector(): Promise<{ state: 'ready' | number; log: () => string; stop: () => Promise<number | null> }> {
    const port = await freePort();
    let log = '';
    const child = spawn(process.execPath, [join(REPO_ROOT, 'apps/projector/dist/main.js')], {
      env: { PATH: process.env.PATH ?? '', AGENTRUN_MODE: 'local', AGENTRUN_PROFILE: 'test', DATABASE_URL: urls.databaseUrl(database), DATABASE_POOL_SIZE: '2', PROJECTOR_PORT: String(port), ...settings },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.on('data', (c: Buffer) => (log += c.toString()));
    child.stderr.on('data', (c: Buffer) => (log += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    // Wrapped: an exit code of 0 is an answer too, and waitFor takes 0 for "not yet".
    const { state } = await waitFor('the projector to be ready or to exit', async (): Promise<{ state: 'ready' | number } | false> => {
      if (child.exitCode !== null) return { state: child.exitCode };
      const res = await fetch(`http://127.0.0.1:${port}/readyz`);
      return res.status === 200 && { state: 'ready' };
    }, 90_000, 200);
    return {
      state,
      log: () => log,
      stop: async () => {
        if (child.exitCode === null) child.kill('SIGTERM');
        return exited;
      },
    };
  }

  it('a service refuses to start on missing topics, with one message naming the brokers and the fix', async () => {
    const projector = await startProjector();
    await projector.stop();
    expect(projector.state).toBe(1);
    const lines = projector.log().split('\n').filter((l) => l.includes('KafkaStartupError'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`Kafka at ${settings.KAFKA_BROKERS}: the topics this service uses are not as declared: ${prefix}${TOPICS.runEvents}: missing`);
    expect(lines[0]).toContain('Run `npm run topics -- apply`');
  });

  it('apply creates the declared topics, a second apply changes nothing, and check finds them as declared', async () => {
    const applied = await topics('apply', settings);
    expect(applied.code).toBe(0);
    expect(applied.out.match(/^created /gm)).toHaveLength(names.length);

    // What the broker itself says, not what the tool reports.
    const { topics: metadata } = await admin.fetchTopicMetadata({ topics: names });
    expect(Object.fromEntries(metadata.map((t) => [t.name, t.partitions.length]))).toEqual({
      [prefix + TOPICS.commands]: 3,
      [prefix + TOPICS.commandResults]: 3,
      [prefix + TOPICS.commandsDlq]: 3,
      [prefix + TOPICS.runEvents]: 3,
      [prefix + TOPICS.runEventsDlq]: 3,
      [prefix + TOPICS.runState]: 3,
      [prefix + TOPICS.runTokens]: 3,
    });
    const { resources } = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [prefix + TOPICS.runState, prefix + TOPICS.runEvents].map((name) => ({ type: ConfigResourceTypes.TOPIC, name, configNames: ['cleanup.policy', 'min.insync.replicas', 'max.message.bytes', 'retention.ms'] })),
    });
    const configs = Object.fromEntries(resources.map((r) => [r.resourceName, Object.fromEntries(r.configEntries.map((e) => [e.configName, e.configValue]))]));
    expect(configs[prefix + TOPICS.runState]).toMatchObject({ 'cleanup.policy': 'compact', 'min.insync.replicas': '1', 'max.message.bytes': '1048576' });
    expect(configs[prefix + TOPICS.runEvents]).toMatchObject({ 'cleanup.policy': 'delete', 'retention.ms': '604800000', 'max.message.bytes': '1048576' });

    const again = await topics('apply', settings);
    expect(again.code).toBe(0);
    expect(again.out).toContain('nothing to change');

    const checked = await topics('check', settings);
    expect(checked.code).toBe(0);
    expect(checked.out).toContain('every topic is as declared');
  });

  it('the service starts once the topics are there', async () => {
    const projector = await startProjector();
    expect(projector.state).toBe('ready');
    expect(await projector.stop()).toBe(0);
  });

  it('check reports a changed spec, difference by difference, and exits non-zero; apply then fixes what it can', async () => {
    const changed = { ...settings, KAFKA_TOPIC_PARTITIONS: '4', KAFKA_RETENTION_MS: '86400000', KAFKA_REPLICATION_FACTOR: '2' };
    const checked = await topics('check', changed);
    expect(checked.code).toBe(1);
    expect(checked.out).toContain(`differs   ${prefix}${TOPICS.commands}: 3 partitions, wanted at least 4`);
    expect(checked.out).toContain(`differs   ${prefix}${TOPICS.runEvents}: retention.ms=604800000, wanted 86400000`);
    expect(checked.out).toContain(`differs   ${prefix}${TOPICS.runState}: replication factor 1, wanted 2`);
    // Dead-letter topics keep at most 3 partitions, so they have what the changed spec asks.
    expect(checked.out).not.toContain(`${prefix}${TOPICS.commandsDlq}: 3 partitions`);

    const applied = await topics('apply', changed);
    expect(applied.code).toBe(1);
    expect(applied.out).toContain(`raised    ${prefix}${TOPICS.runEvents}: partitions 3 -> 4`);
    expect(applied.out).toContain(`altered   ${prefix}${TOPICS.commands}: retention.ms 604800000 -> 86400000`);
    expect(applied.out).toContain(`remains   ${prefix}${TOPICS.runEvents}: replication factor 1, wanted 2`);
    const { topics: metadata } = await admin.fetchTopicMetadata({ topics: [prefix + TOPICS.runEvents] });
    expect(metadata[0].partitions).toHaveLength(4);

    // Back at one replica, only what apply cannot undo is left: nothing, since partitions are a minimum.
    const back = await topics('check', { ...changed, KAFKA_REPLICATION_FACTOR: '1' });
    expect(back.code).toBe(0);
  });

  it('check fails with the brokers and the setting to fix when it cannot connect', async () => {
    const result = await topics('check', { ...settings, KAFKA_BROKERS: '127.0.0.1:1' });
    expect(result.code).toBe(1);
    expect(result.out).toContain('Kafka at 127.0.0.1:1 cannot be reached (ECONNREFUSED). Check KAFKA_BROKERS');
  });
});
