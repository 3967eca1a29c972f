import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from '../support/stack-env';
import { freePort, Platform, uniqueId } from '../support/platform';
import { waitFor } from '../support/wait';

/**
 * The orchestrator's three roles as three processes, as a cluster runs them: the platform's own
 * orchestrator decides commands only, and two more processes run the workflow worker and the CPU tools.
 * A run started over Kafka needs all three, so reaching `done` proves each did its part.
 */
interface RoleProcess {
  roles: string;
  port: number;
  child: ChildProcess;
  exit: Promise<number | null>;
}

describe('orchestrator roles in separate processes', () => {
  const platform = new Platform();
  const extra: RoleProcess[] = [];

  async function startRole(roles: string): Promise<RoleProcess> {
    const port = await freePort();
    const log = createWriteStream(join(platform.dataDir, 'logs', `orchestrator-${roles}.log`), { flags: 'a' });
    const child = spawn(process.execPath, [join(REPO_ROOT, 'apps/orchestrator/dist/main.js')], {
      env: { ...platform.env('orchestrator'), ORCHESTRATOR_ROLES: roles, ORCHESTRATOR_PORT: String(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const role = { roles, port, child, exit };
    extra.push(role);
    await waitFor(`the ${roles} orchestrator to be ready`, async () => {
      if (child.exitCode !== null) throw new Error(`the ${roles} orchestrator exited with ${child.exitCode}`);
      return (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200;
    }, 90_000, 200);
    return role;
  }

  async function readiness(port: number): Promise<string[]> {
    const body = (await (await fetch(`http://127.0.0.1:${port}/readyz`)).json()) as { checks: Record<string, string> };
    return Object.keys(body.checks).sort();
  }

  beforeAll(async () => {
    platform.appEnv.orchestrator = { ORCHESTRATOR_ROLES: 'commands' };
    await platform.start();
    await startRole('workflows');
    await startRole('cpu-tools');
  });
  afterAll(async () => {
    for (const role of extra) if (role.child.exitCode === null) role.child.kill('SIGKILL');
    await platform.stop();
  });

  it('each process checks only the dependencies its roles use', async () => {
    expect(await readiness(platform.ports.orchestrator)).toEqual(['command-consumer', 'kafka', 'postgres', 'temporal']);
    expect(await readiness(extra[0].port)).toEqual(['kafka', 'temporal-workers']);
    expect(await readiness(extra[1].port)).toEqual(['kafka', 'postgres', 'temporal-workers']);
  });

  it('a run started over Kafka reaches done through the three of them', async () => {
    const org = 'acme';
    const runId = uniqueId('roles');
    await platform.publishCommand({ command_id: uniqueId('c'), type: 'agent.start', org, run_id: runId, payload: { goal: 'summarise the workspace', max_steps: 4 } });
    await platform.waitForStatus(org, runId, 'done');
    const [row] = await platform.query<{ state: { step: number } }>('SELECT state FROM runs WHERE org = $1 AND run_id = $2', [org, runId]);
    expect(row.state.step).toBe(4);
  });

  it('each role process stops cleanly on SIGTERM', async () => {
    for (const role of extra) role.child.kill('SIGTERM');
    expect(await Promise.all(extra.map((r) => r.exit))).toEqual([0, 0]);
  });
});
