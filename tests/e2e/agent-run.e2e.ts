import { Client, Connection, WorkflowUpdateFailedError, type WorkflowHandle } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { TOPICS, type RunEventEnvelope } from '@agentrun/contracts';
import { CARRIED_EVENTS_KEY, changeGoalUpdate, isCarriedEvents } from '@agentrun/workflows';
import { oneToN, scriptedRunShape, seqsOnTopic } from '../support/invariants';
import { Platform, uniqueId, type TopicRecord } from '../support/platform';
import { stackUrls } from '../support/stack-env';
import { waitFor } from '../support/wait';
import { replayHistories } from '../support/histories';
import { scrapeMetrics, total } from '../support/prometheus';

/**
 * The agent loop's guarantees against the real servers. Tools are paced (4 ticks of 250 ms, each a
 * heartbeat) so a GPU step is in flight long enough to kill its worker. GPU work waits at most 20 s
 * for a worker: long enough for a killed GPU worker to start again beside the parallel pass's other
 * files (4 s was not, in CI), short enough for the lane nobody serves to fail the run soon.
 */
describe('AgentRun on the real servers', () => {
  const platform = new Platform({
    TOOL_PACE_TICKS: '4',
    TOOL_PACE_MS: '250',
    AGENTRUN_TOOL_HEARTBEAT_S: '2',
    AGENTRUN_GPU_SCHEDULE_TO_START_S: '20',
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
      const stalledBefore = total(await scrapeMetrics(platform.ports.orchestrator), 'agentrun_stalled_carrier_events_total');
      await start(runId, 6);
      // The GPU call nobody picks up carries the previous step's events: the stalled-carrier watch
      // publishes them (after AGENTRUN_CARRIER_STALL_MS) while the call is still queued and the run
      // still running, so the run's stream does not stand still behind the lane.
      const handle = client.workflow.getHandle(`${org}/${runId}`);
      const queued = await waitFor('a queued GPU call', () => gpuCallScheduled(handle), 60_000, 20);
      const carried = await carriedBy(handle, queued.activityId);
      expect(carried.length).toBeGreaterThan(0);
      await waitFor('the queued call\'s events in the read model', async () => {
        const seqs = new Set((await runEvents(runId)).map((e) => e.seq));
        return carried.every((e) => seqs.has(e.seq));
      }, 30_000, 20);
      const now = await handle.describe();
      expect({
        status: now.status.name,
        queued: (now.raw.pendingActivities ?? []).filter((a) => a.activityId === queued.activityId).map((a) => String(a.state)),
      }).toEqual({ status: 'RUNNING', queued: [String(temporal.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED)] });
      expect(total(await scrapeMetrics(platform.ports.orchestrator), 'agentrun_stalled_carrier_events_total') - stalledBefore).toBeGreaterThanOrEqual(carried.length);
      await platform.waitForStatus(org, runId, 'failed', 90_000);
      const run = await platform.http('GET', `/runs/${runId}`, { org });
      expect(run.body.state).toMatchObject({ status: 'failed', reason: 'lane_stalled' });
      expect(run.body.state.message).toMatch(/gpu-tools/);
    } finally {
      await platform.startApp('gpu-worker');
    }
  });

  /** The run's first call scheduled on a `gpu-tools` lane, read from the history (undefined before). */
  async function gpuCallScheduled(handle: WorkflowHandle): Promise<{ activityId: string } | undefined> {
    const history = await handle.fetchHistory();
    const a = (history.events ?? []).find((e) => e.activityTaskScheduledEventAttributes?.taskQueue?.name?.endsWith('gpu-tools'))?.activityTaskScheduledEventAttributes;
    return a?.activityId ? { activityId: a.activityId } : undefined;
  }

  /** The run events a scheduled call carries (its last argument, read from the history). */
  async function carriedBy(handle: WorkflowHandle, activityId: string): Promise<RunEventEnvelope[]> {
    const history = await handle.fetchHistory();
    const scheduled = (history.events ?? []).find((e) => e.activityTaskScheduledEventAttributes?.activityId === activityId);
    const last = scheduled?.activityTaskScheduledEventAttributes?.input?.payloads?.at(-1);
    const value = last ? defaultPayloadConverter.fromPayload(last) : undefined;
    return isCarriedEvents(value) ? (value[CARRIED_EVENTS_KEY] as RunEventEnvelope[]) : [];
  }

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

  it("a run started over Kafka has its CPU calls on its workflow's own task queue, each handed to the worker with the task that scheduled it", async () => {
    // The platform's orchestrator runs all three roles (AGENTRUN_CPU_TOOLS_WITH_WORKFLOWS): its workflow
    // worker serves the CPU tools and model calls too, so the SDK asks the server for them eagerly.
    // The SDK's count of activity tasks this worker got on the workflow's queue, eager or by a poll.
    const received = async (): Promise<{ eager: number; polled: number }> => {
      const text = await (await fetch(`http://127.0.0.1:${platform.ports.orchestrator}/metrics`)).text();
      const out = { eager: 0, polled: 0 };
      for (const line of text.split('\n')) {
        if (!line.startsWith('temporal_activity_task_received{') || !line.includes(`task_queue="${platform.prefix}agent-workflows"`)) continue;
        out[line.includes('eager="true"') ? 'eager' : 'polled'] += Number(line.slice(line.lastIndexOf(' ') + 1));
      }
      return out;
    };
    const before = await received();
    const runId = uniqueId('eager');
    await start(runId, 4);
    await platform.waitForStatus(org, runId, 'done');
    const history = (await client.workflow.getHandle(`${org}/${runId}`).fetchHistory()).events ?? [];
    const scheduled = history.flatMap((e) => {
      const a = e.activityTaskScheduledEventAttributes;
      return a && a.activityType?.name !== 'publishRunEvents' ? [[a.activityType?.name, a.taskQueue?.name?.slice(platform.prefix.length)]] : [];
    });
    expect(scheduled).toEqual([
      ['prepareWorkspace', 'agent-workflows'],
      ['callModel', 'agent-workflows'],
      ['runTool', 'agent-workflows'],
      ['runTool', 'gpu-tools'],
    ]);
    // Every call of this run on the workflow's queue (the three above, its two publishes, the research
    // child's model call) was taken by this worker, and all but at most one with its workflow task.
    // Eager dispatch is the SDK's best effort: once in about fifteen runs, the first run after the
    // stack started, one call came through a poll instead.
    const after = await received();
    const got = { eager: after.eager - before.eager, polled: after.polled - before.polled };
    expect(got.eager + got.polled).toBe(6);
    expect(got.eager).toBeGreaterThanOrEqual(5);
  });

  it('a run whose CPU calls are on its workflow\'s queue finishes after the orchestrator restarts with that setting off; new runs take cpu-tools', async () => {
    const cpuCalls = async (runId: string) => {
      const history = (await client.workflow.getHandle(`${org}/${runId}`).fetchHistory()).events ?? [];
      return {
        queues: [...new Set(history.flatMap((e) => {
          const a = e.activityTaskScheduledEventAttributes;
          return a && a.activityType?.name !== 'publishRunEvents' && !a.taskQueue?.name?.endsWith('gpu-tools') ? [a.taskQueue?.name?.slice(platform.prefix.length)] : [];
        }))],
        failed: history.filter((e) => e.activityTaskFailedEventAttributes).map((e) => e.activityTaskFailedEventAttributes?.failure?.message),
      };
    };
    const runId = uniqueId('flip');
    const steps = 40;
    const command = (type: 'agent.pause' | 'agent.resume') => platform.publishCommand({ command_id: uniqueId('c'), type, org, run_id: runId, payload: {} });
    const stepOf = async () =>
      (await platform.query<{ step: number }>(`SELECT (state->>'step')::int AS step FROM runs WHERE org = $1 AND run_id = $2`, [org, runId]))[0]?.step ?? 0;
    await start(runId, steps);
    await waitFor('the run to be a few steps in', async () => (await stepOf()) >= 3, 60_000);
    // Paused, so its next steps come after the restart.
    await command('agent.pause');
    await platform.waitForStatus(org, runId, 'paused');
    const pausedAt = await stepOf();
    expect(pausedAt).toBeLessThan(steps);
    const saved = platform.appEnv.orchestrator;
    try {
      // Its input keeps agent-workflows as its CPU lane: the restarted worker must still serve it there.
      expect(await platform.stopApp('orchestrator')).toBe(0);
      platform.appEnv.orchestrator = { ...saved, AGENTRUN_CPU_TOOLS_WITH_WORKFLOWS: 'false' };
      await platform.startApp('orchestrator');
      await command('agent.resume');
      await platform.waitForStatus(org, runId, 'done', 90_000);
      expect(await cpuCalls(runId)).toEqual({ queues: ['agent-workflows'], failed: [] });
      const after = uniqueId('flip-after');
      await start(after, 2);
      await platform.waitForStatus(org, after, 'done');
      expect(await cpuCalls(after)).toEqual({ queues: ['cpu-tools'], failed: [] });
    } finally {
      await platform.stopApp('orchestrator');
      if (saved) platform.appEnv.orchestrator = saved;
      else delete platform.appEnv.orchestrator;
      await platform.startApp('orchestrator');
    }
    expect(await stepOf()).toBe(steps);
  });

  it('an Update the validator rejects never reaches history; an accepted one does, once', async () => {
    const runId = uniqueId('update');
    await start(runId, 400);
    await platform.waitForStatus(org, runId, 'running');
    const handle = client.workflow.getHandle(`${org}/${runId}`);
    const rejected = (goal: string, id: string) => handle.executeUpdate(changeGoalUpdate, { args: [{ command_id: id, goal }], updateId: id });
    await expect(rejected('', 'u-1')).rejects.toBeInstanceOf(WorkflowUpdateFailedError);
    await expect(rejected('', 'u-1b')).rejects.toMatchObject({ cause: { message: 'goal must not be empty' } });
    await expect(rejected('x'.repeat(8_001), 'u-2')).rejects.toMatchObject({ cause: { message: 'goal must be at most 8000 characters' } });
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
