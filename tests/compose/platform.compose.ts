import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TOPICS, type RunEventEnvelope } from '@agentrun/contracts';
import { ComposeStack } from '../support/compose';
import { oneToN, scriptedRunShape, seqsOnTopic } from '../support/invariants';
import { uniqueId, type TopicRecord } from '../support/platform';
import { waitFor } from '../support/wait';

/**
 * docker-compose.yml, up for real (tests/compose/run.sh): the platform as a compose user gets it, seen
 * only through the 127.0.0.1 published ports, with an API token (the apps run in production mode).
 */
describe('the compose stack', () => {
  const stack = new ComposeStack();
  const org = stack.org;
  let events: TopicRecord<RunEventEnvelope>[];
  let workDir: string;

  beforeAll(async () => {
    workDir = mkdtempSync(join(tmpdir(), 'compose-e2e-'));
    events = await stack.follow<RunEventEnvelope>(TOPICS.runEvents);
  });
  afterAll(async () => {
    await stack.close();
    rmSync(workDir, { recursive: true, force: true });
  });

  /**
   * The run is done, and the topic and the SSE stream each carry exactly seqs 1..N: a scripted run's
   * events, and two status changes (paused, then running) for each time it was held.
   */
  async function expectCompleteRun(runId: string, steps: number, holds = 0): Promise<void> {
    await stack.waitForStatus(runId, 'done');
    const n = scriptedRunShape(steps).events + 2 * holds;
    await waitFor('every event on the topic', () => seqsOnTopic(events, org, runId).length >= n, 60_000);
    expect(seqsOnTopic(events, org, runId)).toEqual(oneToN(n));
    const sse = await stack.streamToEnd(runId);
    expect(sse.status).toBe(200);
    expect(sse.events().map((e) => e.seq)).toEqual(oneToN(n));
    expect(sse.frames.at(-1)).toMatchObject({ event: 'end' });
    expect(await stack.runOf(runId)).toMatchObject({ status: 'done', last_seq: n });
  }

  it('a run started by a Kafka command reaches done, with seqs 1..N on the topic and on the SSE stream', async () => {
    const runId = uniqueId('compose-kafka');
    const steps = 5;
    await stack.publishCommand({ command_id: uniqueId('c'), type: 'agent.start', org, run_id: runId, payload: { goal: 'run under compose', max_steps: steps } });
    await expectCompleteRun(runId, steps);
    // The command's outcome went back on the results topic too.
    const results = await stack.follow<{ run_id: string; outcome: string }>(TOPICS.commandResults);
    await waitFor('the command result', () => results.find((r) => r.value.run_id === runId), 30_000);
    expect(results.find((r) => r.value.run_id === runId)?.value.outcome).toBe('accepted');
  });

  it('serves the HTTP API (token required) and the dashboard static files', async () => {
    const list = await stack.http('GET', '/runs?limit=5');
    expect(list.status).toBe(200);
    expect(Array.isArray(list.body.runs)).toBe(true);
    expect((await stack.http('GET', '/runs', { token: null })).status).toBe(401);
    expect((await stack.http('GET', '/runs', { token: 'not-a-token' })).status).toBe(401);
    const bad = await stack.http('POST', '/agents', { body: { goal: 42 } });
    expect(bad.status).toBe(400);
    expect(bad.headers.get('content-type')).toMatch(/application\/problem\+json/);

    const page = await fetch(`${stack.gatewayUrl}/ui/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/text\/html/);
    const html = await page.text();
    expect(html).toMatch(/app\.js/);
    for (const [asset, type] of [['app.js', /javascript/], ['app.css', /text\/css/]] as const) {
      const res = await fetch(`${stack.gatewayUrl}/ui/${asset}`);
      expect({ asset, status: res.status }).toEqual({ asset, status: 200 });
      expect(res.headers.get('content-type')).toMatch(type);
      expect((await res.arrayBuffer()).byteLength).toBeGreaterThan(100);
    }
    // Every service answers its readiness probe on its published port.
    for (const port of [8080, 8081, 8082, 8083, 8084]) expect({ port, status: await stack.readyz(port) }).toEqual({ port, status: 200 });
  });

  it('an eval reaches awaiting_review, and a listed reviewer publishes it', async () => {
    const runId = uniqueId('compose-eval');
    const started = await stack.http('POST', '/evals', { body: { run_id: runId, model: 'm-1', suite: 'smoke', cases: 6, fail_fraction: 0.3, reviewers: ['alice'] } });
    expect(started.status).toBe(202);
    await stack.waitForStatus(runId, 'awaiting_review');
    const approve = await stack.http('POST', `/runs/${runId}/approve`, { body: { reviewer: 'alice' } });
    expect(approve.status).toBe(202);
    await stack.waitForStatus(runId, 'published');
  });

  it('a snapshot archive downloads and GNU tar reads it', async () => {
    const runId = uniqueId('compose-snap');
    const started = await stack.http('POST', '/agents', { body: { run_id: runId, goal: 'leave a workspace', max_steps: 2, snapshots: {} } });
    expect(started.status).toBe(202);
    await stack.waitForStatus(runId, 'done');
    const final = await waitFor('the final snapshot', async () => {
      const res = await stack.http('GET', `/runs/${runId}/snapshots`);
      const rows: { snapshot_id: string; is_final: boolean; capture_status: string }[] = res.status === 200 ? (res.body.items ?? []) : [];
      return rows.find((r) => r.is_final && r.capture_status === 'ok');
    }, 60_000, 250);
    const res = await fetch(`${stack.gatewayUrl}/runs/${runId}/snapshots/${final.snapshot_id}/archive`, { headers: stack.auth });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/gzip');
    const file = join(workDir, `${runId}.tar.gz`);
    writeFileSync(file, Buffer.from(await res.arrayBuffer()));
    expect(execFileSync('tar', ['tzf', file], { encoding: 'utf8' })).toMatch(/goal\.md/);
  });

  it('`compose restart orchestrator` mid-run loses nothing: the run, held across the restart, completes with seqs 1..N', async () => {
    const runId = uniqueId('compose-restart');
    const steps = 40;
    await stack.publishCommand({ command_id: uniqueId('c'), type: 'agent.start', org, run_id: runId, payload: { goal: 'outlive a restart', max_steps: steps } });
    await waitFor('the run to be a few steps in', async () => ((await stack.runOf(runId))?.state?.step ?? -1) >= 3, 120_000, 100);
    // Held (paused) across the restart, so the restart lands mid-run however long it takes: the run
    // cannot end before it, and its workflow must be there, and go on, after it.
    await stack.holdRun(runId);
    const held = await stack.runOf(runId);
    expect(held).toMatchObject({ status: 'paused', state: { step: expect.any(Number) } });
    expect(held!.state.step!).toBeLessThan(steps);
    await stack.restart('orchestrator');
    await waitFor('the orchestrator ready again', async () => (await stack.readyz(8081)) === 200, 120_000, 500);
    // The restart has landed, and the run is still there mid-run: its workflow running (not completed,
    // failed or terminated), held where it was.
    expect(await stack.workflowStatus(runId)).toBe('RUNNING');
    expect(await stack.runOf(runId)).toMatchObject({ status: 'paused', state: { step: held!.state.step } });
    await stack.releaseRun(runId);
    await expectCompleteRun(runId, steps, 1);
    // Its status changes (by seq: a record published again is the same event) are the hold's and the release's.
    const changes = new Map(events.filter((e) => e.value.org === org && e.value.run_id === runId && e.value.type === 'status_changed').map((e) => [e.value.seq, e.value.payload.state?.status]));
    expect([...changes].sort(([a], [b]) => a - b).map(([, status]) => status)).toEqual(['paused', 'running']);
  });
});
