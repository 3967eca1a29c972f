import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { TOPICS, type RunEventEnvelope } from '@agentrun/contracts';
import { oneToN, scriptedRunShape, seqsOnTopic } from '../support/invariants';
import { APPS, Platform, uniqueId, type TopicRecord } from '../support/platform';
import { REPO_ROOT } from '../support/stack-env';
import { waitFor } from '../support/wait';

const run = promisify(execFile);

async function stepOf(platform: Platform, org: string, runId: string): Promise<number> {
  const rows = await platform.query<{ step: number }>(`SELECT (state->>'step')::int AS step FROM runs WHERE org = $1 AND run_id = $2`, [org, runId]);
  return rows[0]?.step ?? -1;
}

/** After a fault: the run is done, and the topic and the read model hold exactly seqs 1..N. */
async function expectComplete(platform: Platform, events: TopicRecord<RunEventEnvelope>[], org: string, runId: string, steps: number): Promise<void> {
  await platform.waitForStatus(org, runId, 'done', 180_000);
  const shape = scriptedRunShape(steps);
  const n = shape.events;
  await waitFor('every event on the topic', () => seqsOnTopic(events, org, runId).length === n, 60_000);
  expect(seqsOnTopic(events, org, runId)).toEqual(oneToN(n));
  const stored = await platform.query<{ seq: number }>('SELECT seq FROM run_events WHERE org = $1 AND run_id = $2 ORDER BY seq', [org, runId]);
  expect(stored.map((r) => r.seq)).toEqual(oneToN(n));
  const [row] = await platform.query<{ last_seq: number; status: string }>('SELECT last_seq, status FROM runs WHERE org = $1 AND run_id = $2', [org, runId]);
  expect(row).toEqual({ last_seq: n, status: 'done' });
  // Each model call and tool step happened once, whatever was retried; each sub-agent's call too.
  const [{ n: effects }] = await platform.query<{ n: string }>(
    `SELECT count(*) AS n FROM effect_ledger WHERE starts_with(idempotency_key, $1)`,
    [`${org}/${runId}:`],
  );
  expect(Number(effects)).toBe(shape.effects);
  const [{ n: research }] = await platform.query<{ n: string }>(
    `SELECT count(*) AS n FROM effect_ledger WHERE starts_with(idempotency_key, $1)`,
    [`${org}/${runId}/research/`],
  );
  expect(Number(research)).toBe(shape.research);
}

describe('runs survive their services and servers stopping mid-run', () => {
  // Tools paced (0.4 s each, about 8 s a run) so every fault below lands while the run is still going:
  // unpaced, a 40-step run could end before the stopped service did.
  const platform = new Platform({ TOOL_PACE_TICKS: '4', TOOL_PACE_MS: '100' });
  let events: TopicRecord<RunEventEnvelope>[];

  beforeAll(async () => {
    await platform.start();
    events = await platform.follow<RunEventEnvelope>(TOPICS.runEvents);
  });
  afterAll(() => platform.stop());

  it.each(APPS)('SIGTERM to the %s mid-run drains it cleanly; after a restart nothing is lost', async (app) => {
    const org = 'acme';
    const runId = uniqueId(`sigterm-${app}`);
    const steps = 40;
    await platform.publishCommand({ command_id: uniqueId('c'), type: 'agent.start', org, run_id: runId, payload: { goal: `survive ${app}`, max_steps: steps } });
    await waitFor('the run to be a few steps in', async () => (await stepOf(platform, org, runId)) >= 3, 60_000);
    const code = await platform.stopApp(app, 'SIGTERM');
    expect(code).toBe(0);
    // The fault landed mid-run: the run had not finished by the time the service was down.
    expect(await platform.statusOf(org, runId)).toBe('running');
    await platform.startApp(app);
    await expectComplete(platform, events, org, runId, steps);
  });

  it('stack:down and stack:up mid-run: the run still completes with no lost or repeated event', async () => {
    const org = 'acme';
    const runId = uniqueId('stack-restart');
    const steps = 40;
    await platform.publishCommand({ command_id: uniqueId('c'), type: 'agent.start', org, run_id: runId, payload: { goal: 'outlive the servers', max_steps: steps } });
    await waitFor('the run to be a few steps in', async () => (await stepOf(platform, org, runId)) >= 3, 60_000);
    expect(await platform.statusOf(org, runId)).toBe('running');
    await platform.db?.end();
    await run('bash', ['deploy/local/stack.sh', 'down'], { cwd: REPO_ROOT });
    await run('bash', ['deploy/local/stack.sh', 'up'], { cwd: REPO_ROOT });
    await platform.reconnectDb();
    await expectComplete(platform, events, org, runId, steps);
    // Every service found its way back on its own.
    for (const app of APPS) {
      await waitFor(`${app} ready again`, async () => (await fetch(`http://127.0.0.1:${platform.ports[app]}/readyz`)).status === 200, 120_000, 500);
    }
  });
});
