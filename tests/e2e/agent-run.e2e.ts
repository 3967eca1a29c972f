import { Client, Connection, WorkflowUpdateFailedError } from '@temporalio/client';
import { TOPICS, type RunEventEnvelope } from '@agentrun/contracts';
import { changeGoalUpdate } from '@agentrun/workflows';
import { oneToN, scriptedRunShape, seqsOnTopic } from '../support/invariants';
import { Platform, uniqueId, type TopicRecord } from '../support/platform';
import { stackUrls } from '../support/stack-env';
import { waitFor } from '../support/wait';
import { replayHistories } from '../support/histories';

/**
 * The agent loop's guarantees against the real servers. Tools are paced (4 ticks of 250 ms, each a
 * heartbeat) so a GPU step is in flight long enough to kill its worker.
 */
describe('AgentRun on the real servers', () => {
  const platform = new Platform({
    TOOL_PACE_TICKS: '4',
    TOOL_PACE_MS: '250',
    AGENTRUN_TOOL_HEARTBEAT_S: '2',
    AGENTRUN_GPU_SCHEDULE_TO_START_S: '4',
  });
  let events: TopicRecord<RunEventEnvelope>[];
  let connection: Connection;
  let client: Client;
  const org = 'acme';

  beforeAll(async () => {
    await platform.start();
    events = await platform.follow<RunEventEnvelope>(TOPICS.runEvents);
    connection = await Connection.connect({ address: stackUrls().temporalAddress });
    client = new Client({ connection, namespace: stackUrls().namespace });
  });
  afterAll(async () => {
    await connection?.close();
    await platform.stop();
  });

  const start = (runId: string, maxSteps: number) =>
    platform.publishCommand({ command_id: uniqueId('c'), type: 'agent.start', org, run_id: runId, payload: { goal: `goal of ${runId}`, max_steps: maxSteps } });
  const leasesOf = async (runId: string) =>
    (await platform.query<{ idempotency_key: string }>('SELECT idempotency_key FROM gpu_leases WHERE org = $1 AND run_id = $2', [org, runId])).map((r) => r.idempotency_key);
  const runEvents = async (runId: string) =>
    (await platform.query<{ event: RunEventEnvelope }>('SELECT event FROM run_events WHERE org = $1 AND run_id = $2 ORDER BY seq', [org, runId])).map((r) => r.event);
  const effectsOf = async (prefix: string) =>
    Number((await platform.query<{ n: string }>('SELECT count(*) AS n FROM effect_ledger WHERE starts_with(idempotency_key, $1)', [prefix]))[0].n);

  it('a stalled GPU attempt times out on its heartbeat and the retry resumes from the last tick, with one effect', async () => {
    const runId = uniqueId('stall');
    await start(runId, 3);
    const [held] = await waitFor('a GPU step in flight', async () => (await leasesOf(runId)).length > 0 && leasesOf(runId), 60_000, 20);
    // Kill only once the server holds a heartbeat of this attempt: that is what the retry resumes from.
    await waitFor('a recorded heartbeat', async () => {
      const { raw } = await client.workflow.getHandle(`${org}/${runId}`).describe();
      return (raw.pendingActivities ?? []).some((a) => (a.heartbeatDetails?.payloads?.length ?? 0) > 0);
    }, 30_000, 20);
    expect(await platform.stopApp('gpu-worker', 'SIGKILL')).toBe(-1);
    await platform.startApp('gpu-worker');
    await platform.waitForStatus(org, runId, 'done');
    const gpuStep = (await runEvents(runId)).find((e) => e.type === 'step_completed' && e.payload.tool === 'embed');
    expect(gpuStep?.payload).toMatchObject({ tool: 'embed', attempt: 2, duplicate: false });
    expect(Number(gpuStep?.payload.resumed_from_tick)).toBeGreaterThanOrEqual(1);
    expect(await effectsOf(held)).toBe(1);
    expect(await leasesOf(runId)).toEqual([]);
  });

  it('Temporal cancel while the GPU worker is dead still gives the GPU back, through the compensation', async () => {
    const runId = uniqueId('saga');
    await start(runId, 40);
    const [held] = await waitFor('a GPU step in flight', async () => (await leasesOf(runId)).length > 0 && leasesOf(runId), 60_000, 20);
    await platform.stopApp('gpu-worker', 'SIGKILL');
    try {
      await client.workflow.getHandle(`${org}/${runId}`).cancel();
      await platform.waitForStatus(org, runId, 'cancelled');
      expect(await leasesOf(runId)).toEqual([]);
      const compensated = (await runEvents(runId)).filter((e) => e.type === 'compensated');
      expect(compensated.map((e) => e.payload.name)).toEqual([`release_gpu:${held}`]);
    } finally {
      await platform.startApp('gpu-worker');
    }
  });

  it('a lane nobody serves fails the run as lane_stalled, with a message that names the lane', async () => {
    const runId = uniqueId('stalled-lane');
    await platform.stopApp('gpu-worker', 'SIGTERM');
    try {
      await start(runId, 6);
      await platform.waitForStatus(org, runId, 'failed', 60_000);
      const run = await platform.http('GET', `/runs/${runId}`, { org });
      expect(run.body.state).toMatchObject({ status: 'failed', reason: 'lane_stalled' });
      expect(run.body.state.message).toMatch(/gpu-tools/);
    } finally {
      await platform.startApp('gpu-worker');
    }
  });

  it('kill -9 of the orchestrator mid-run hands the run over, and every effect ran once', async () => {
    const runId = uniqueId('kill9');
    const steps = 24;
    await start(runId, steps);
    await waitFor('the run to be a few steps in', async () => {
      const rows = await platform.query<{ step: number }>(`SELECT (state->>'step')::int AS step FROM runs WHERE org = $1 AND run_id = $2`, [org, runId]);
      return (rows[0]?.step ?? 0) >= 5;
    }, 60_000);
    expect(await platform.stopApp('orchestrator', 'SIGKILL')).toBe(-1);
    await platform.startApp('orchestrator');
    await platform.waitForStatus(org, runId, 'done', 180_000);
    const shape = scriptedRunShape(steps);
    await waitFor('every event on the topic', () => seqsOnTopic(events, org, runId).length === shape.events, 60_000);
    expect(seqsOnTopic(events, org, runId)).toEqual(oneToN(shape.events));
    expect(await effectsOf(`${org}/${runId}:`)).toBe(shape.effects);
    expect(await effectsOf(`${org}/${runId}/research/`)).toBe(shape.research);

    // The same histories replay through the current workflow code: a change that would break
    // running executions fails here (and the saved copies in tests/fixtures fail the unit tier).
    await replayHistories(client, [
      { workflowId: `${org}/${runId}`, file: 'agent-run.history.pb' },
      { workflowId: `${org}/${runId}/research/3`, file: 'research-agent.history.pb' },
    ]);
  });

  it('an Update the validator rejects never reaches history; an accepted one does, once', async () => {
    const runId = uniqueId('update');
    await start(runId, 400);
    await platform.waitForStatus(org, runId, 'running');
    const handle = client.workflow.getHandle(`${org}/${runId}`);
    const rejected = (goal: string, id: string) => handle.executeUpdate(changeGoalUpdate, { args: [{ command_id: id, goal }], updateId: id });
    await expect(rejected('', 'u-1')).rejects.toBeInstanceOf(WorkflowUpdateFailedError);
    await expect(rejected('', 'u-1b')).rejects.toMatchObject({ cause: { message: 'goal must not be empty' } });
    await expect(rejected('x'.repeat(501), 'u-2')).rejects.toMatchObject({ cause: { message: 'goal must be at most 500 characters' } });
    expect(await handle.executeUpdate(changeGoalUpdate, { args: [{ command_id: 'u-3', goal: 'a better goal' }], updateId: 'u-3' })).toMatch(/a better goal/);
    // A second Update with the same command id is answered, not applied again.
    expect(await handle.executeUpdate(changeGoalUpdate, { args: [{ command_id: 'u-3', goal: 'a better goal' }], updateId: 'u-3b' })).toMatch(/^ignored/);
    await platform.publishCommand({ command_id: uniqueId('c'), type: 'agent.cancel', org, run_id: runId, payload: {} });
    await platform.waitForStatus(org, runId, 'cancelled');
    const history = await handle.fetchHistory();
    const accepted = (history.events ?? []).filter((e) => e.workflowExecutionUpdateAcceptedEventAttributes).map((e) => e.workflowExecutionUpdateAcceptedEventAttributes?.protocolInstanceId);
    expect(accepted).toEqual(['u-3', 'u-3b']);
    expect((await runEvents(runId)).filter((e) => e.type === 'goal_changed')).toHaveLength(1);
  });
});

describe('the llm policy against the local model server', () => {
  const platform = new Platform({ AGENTRUN_TOOL_HEARTBEAT_S: '5' });
  const org = 'acme';
  beforeAll(() => platform.start());
  afterAll(() => platform.stop());

  const runWith = async (scenario: string, maxSteps = 12) => {
    const runId = uniqueId(`llm-${scenario.replace(/_/g, '-')}`);
    await platform.publishCommand({
      command_id: uniqueId('c'),
      type: 'agent.start',
      org,
      run_id: runId,
      payload: { goal: `[scenario:${scenario}] find the parser notes`, max_steps: maxSteps, policy: 'llm' },
    });
    return runId;
  };
  const stepsOf = async (runId: string) =>
    (await platform.query<{ event: RunEventEnvelope }>(`SELECT event FROM run_events WHERE org = $1 AND run_id = $2 AND type = 'step_completed' ORDER BY seq`, [org, runId])).map(
      (r) => r.event.payload as { kind: string; tool?: string; attempt: number; output: string },
    );

  it('the model calls tools on their lanes, reads their results and answers', async () => {
    const runId = await runWith('agent');
    await platform.waitForStatus(org, runId, 'done');
    const steps = await stepsOf(runId);
    expect(steps.map((s) => s.tool ?? s.kind)).toEqual(['llm', 'search', 'embed', 'llm']);
    const run = await platform.http('GET', `/runs/${runId}`, { org });
    expect(run.body.last_events.at(-1).payload.answer).toBeTruthy();
  });

  it.each(['rate_limited', 'server_error'])('%s replies are retried by policy and the run still answers', async (scenario) => {
    const runId = await runWith(scenario);
    await platform.waitForStatus(org, runId, 'done');
    const steps = await stepsOf(runId);
    expect(steps[0]).toMatchObject({ kind: 'llm', attempt: 3 });
    expect(steps.at(-1)?.kind).toBe('llm');
  });

  it('malformed tool arguments go back to the model as an error, and it recovers', async () => {
    const runId = await runWith('malformed_args');
    await platform.waitForStatus(org, runId, 'done');
    const steps = await stepsOf(runId);
    // The broken call ran nothing; the model was asked again, then used its tools and answered.
    expect(steps.slice(0, 2).map((s) => s.kind)).toEqual(['llm', 'llm']);
    expect(steps.filter((s) => s.kind === 'tool').length).toBeGreaterThan(0);
    expect(steps.at(-1)?.kind).toBe('llm');
  });

  it('a reply cut short by the token limit is not taken as the answer: the model is asked to continue', async () => {
    const runId = await runWith('length', 3);
    await platform.waitForStatus(org, runId, 'done');
    const steps = await stepsOf(runId);
    expect(steps.slice(0, 2).map((s) => s.kind)).toEqual(['llm', 'llm']);
    const run = await platform.http('GET', `/runs/${runId}`, { org });
    expect(run.body.last_events.at(-1).payload.answer).toBeUndefined();
  });

  it('a model that refuses the request fails the run at once, without retries', async () => {
    const runId = await runWith('bad_request');
    await platform.waitForStatus(org, runId, 'failed');
    const run = await platform.http('GET', `/runs/${runId}`, { org });
    expect(run.body.state.message).toMatch(/refused/);
  });
});
