import { Client, Connection, WorkflowUpdateFailedError, type WorkflowHandle } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { TOPICS, type ModelCallUsage, type RunEventEnvelope } from '@agentrun/contracts';
import { CARRIED_EVENTS_KEY, changeGoalUpdate, isCarriedEvents } from '@agentrun/workflows';
import { oneToN, scriptedRunShape, seqsOnTopic } from '../support/invariants';
import { Platform, uniqueId, type TopicRecord } from '../support/platform';
import { stackUrls } from '../support/stack-env';
import { waitFor } from '../support/wait';
import { replayHistories } from '../support/histories';
import { scrapeMetrics, total } from '../support/prometheus';
import { budgetCli } from '../support/token-cli';

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
      await platform.waitForStatus(org, runId, 'failed', 60_000);
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
  const price = { input_usd_per_million: 3, output_usd_per_million: 15 };
  // A small completion limit keeps a call's worst case (its prompt and 200 tokens) near what it uses.
  const platform = new Platform({ AGENTRUN_TOOL_HEARTBEAT_S: '5', AGENTRUN_MODEL_PRICES: JSON.stringify({ scripted: price }), AGENTRUN_MODEL_MAX_TOKENS: '200' });
  const org = 'acme';
  beforeAll(() => platform.start());
  afterAll(() => platform.stop());

  const runWith = async (scenario: string, maxSteps = 12, runOrg = org) => {
    const runId = uniqueId(`llm-${scenario.replace(/_/g, '-')}`);
    await platform.publishCommand({
      command_id: uniqueId('c'),
      type: 'agent.start',
      org: runOrg,
      run_id: runId,
      payload: { goal: `[scenario:${scenario}] find the parser notes`, max_steps: maxSteps, policy: 'llm' },
    });
    return runId;
  };
  const stepsOf = async (runId: string, runOrg = org) =>
    (await platform.query<{ event: RunEventEnvelope }>(`SELECT event FROM run_events WHERE org = $1 AND run_id = $2 AND type = 'step_completed' ORDER BY seq`, [runOrg, runId])).map(
      (r) => r.event.payload as { kind: string; tool?: string; attempt: number; output: string; usage?: ModelCallUsage },
    );

  it("every model call records its tokens and cost; the run's state and the org's GET /usage add them up", async () => {
    const spender = uniqueId('spend');
    const runs = [await runWith('agent', 12, spender), await runWith('agent', 12, spender)];
    const perRun = new Map<string, { calls: number; prompt_tokens: number; completion_tokens: number; cost_usd: number }>();
    for (const runId of runs) {
      await platform.waitForStatus(spender, runId, 'done');
      const calls = (await stepsOf(runId, spender)).filter((s) => s.kind === 'llm');
      expect(calls.length).toBeGreaterThanOrEqual(2);
      // The local server reports usage (words counted), so nothing is estimated; the price is the table's.
      for (const { usage } of calls) {
        expect(usage).toMatchObject({ model: 'scripted', priced: true });
        expect(usage!.estimated).toBeUndefined();
        expect(usage!.prompt_tokens).toBeGreaterThan(0);
        expect(usage!.cost_usd).toBeCloseTo((usage!.prompt_tokens * price.input_usd_per_million + usage!.completion_tokens * price.output_usd_per_million) / 1e6, 8);
      }
      const sum = {
        calls: calls.length,
        prompt_tokens: calls.reduce((n, c) => n + c.usage!.prompt_tokens, 0),
        completion_tokens: calls.reduce((n, c) => n + c.usage!.completion_tokens, 0),
        cost_usd: calls.reduce((n, c) => n + c.usage!.cost_usd, 0),
      };
      perRun.set(runId, sum);
      const run = await platform.http('GET', `/runs/${runId}`, { org: spender });
      expect(run.body.state.usage).toMatchObject({ calls: sum.calls, prompt_tokens: sum.prompt_tokens, completion_tokens: sum.completion_tokens, estimated_calls: 0 });
      expect(run.body.state.usage.cost_usd).toBeCloseTo(sum.cost_usd, 8);
    }
    const listed = await platform.http('GET', '/runs', { org: spender });
    expect(listed.body.runs.map((r: { run_id: string; state: { usage?: unknown } }) => [r.run_id, Boolean(r.state.usage)]).sort()).toEqual(runs.map((r) => [r, true]).sort());

    const all = [...perRun.values()];
    const total = { calls: all.reduce((n, r) => n + r.calls, 0), prompt_tokens: all.reduce((n, r) => n + r.prompt_tokens, 0), completion_tokens: all.reduce((n, r) => n + r.completion_tokens, 0) };
    const byRun = await platform.http('GET', '/usage?group_by=run', { org: spender });
    expect(byRun.status).toBe(200);
    expect(byRun.body).toMatchObject({ group_by: 'run', total: { ...total, estimated_calls: 0, unpriced_calls: 0 }, truncated: false });
    expect(byRun.body.total.cost_usd).toBeCloseTo(all.reduce((n, r) => n + r.cost_usd, 0), 8);
    expect(Object.fromEntries(byRun.body.groups.map((g: { key: string; calls: number; prompt_tokens: number; completion_tokens: number }) => [g.key, [g.calls, g.prompt_tokens, g.completion_tokens]]))).toEqual(
      Object.fromEntries([...perRun].map(([runId, r]) => [runId, [r.calls, r.prompt_tokens, r.completion_tokens]])),
    );
    const byModel = await platform.http('GET', '/usage?group_by=model', { org: spender });
    expect(byModel.body.groups).toEqual([{ key: 'scripted', ...byRun.body.total }]);
    const today = new Date().toISOString().slice(0, 10);
    const byDay = await platform.http('GET', `/usage?group_by=day&from=${today}`, { org: spender });
    expect(byDay.body.groups.map((g: { key: string; calls: number }) => [g.key, g.calls])).toEqual([[today, total.calls]]);
    // Another org's calls are not this org's; a range before them holds nothing.
    expect((await platform.http('GET', '/usage?group_by=run', { org })).body.groups.map((g: { key: string }) => g.key)).not.toContain(runs[0]);
    expect((await platform.http('GET', '/usage?from=2020-01-01&to=2020-02-01', { org: spender })).body.total.calls).toBe(0);
    // Bad questions get a 4xx that says what is wrong: 400 outside the documented forms, 422 for a range that is not one.
    for (const [query, status, detail] of [
      ['group_by=week', 400, /group_by must be one of model, run, day/],
      ['to=2026-12-01T10:00:00', 400, /date-time with an offset/],
      ['from=2026-02-31', 422, /not a real date/],
      ['from=2026-12-02&to=2026-12-01', 422, /must be before to/],
    ] as const) {
      const bad = await platform.http('GET', `/usage?${query}`, { org: spender });
      expect({ query, status: bad.status }).toEqual({ query, status });
      expect(bad.body.detail).toMatch(detail);
    }
  });

  const eventsOf = async (runId: string, runOrg: string) =>
    (await platform.query<{ event: RunEventEnvelope }>('SELECT event FROM run_events WHERE org = $1 AND run_id = $2 ORDER BY seq', [runOrg, runId])).map((r) => r.event);
  const tokensOf = (u: ModelCallUsage | undefined) => (u ? u.prompt_tokens + u.completion_tokens : 0);

  it('a run pauses at the model call whose worst case passes its token budget, and a raise lets it finish; each call reserved once', async () => {
    const spender = uniqueId('budget');
    const runId = uniqueId('llm-budget');
    const start = await platform.http('POST', '/agents', { org: spender, body: { run_id: runId, goal: '[scenario:agent] find the parser notes', max_steps: 12, policy: 'llm', budget: { max_tokens: 300 } } });
    expect(start.status).toBe(202);
    await platform.waitForStatus(spender, runId, 'paused');
    const exhausted = await waitFor('the budget_exhausted event', async () => (await eventsOf(runId, spender)).find((e) => e.type === 'budget_exhausted'), 30_000);
    const stepsBefore = await stepsOf(runId, spender);
    const before = stepsBefore.filter((s) => s.kind === 'llm');
    // Every call before it fitted and ran; this one's worst case (its prompt and 200 tokens) did not.
    expect(before.length).toBeGreaterThanOrEqual(1);
    const spent = before.reduce((n, s) => n + tokensOf(s.usage), 0);
    expect(exhausted.payload).toMatchObject({ scope: 'run', limit: 'tokens', max: 300, spent, reserved: 0, left: 300 - spent, step: stepsBefore.length });
    expect(spent + (exhausted.payload.needed as number)).toBeGreaterThan(300);
    expect(exhausted.payload.state).toMatchObject({ status: 'paused', reason: 'budget_exhausted', budget: { max_tokens: 300 } });
    // A raise that is not higher is refused by the workflow's validator, and never reaches history.
    const lower = await platform.http('POST', `/runs/${runId}/raise-budget`, { org: spender, body: { max_tokens: 300 } });
    expect(lower.status).toBe(422);
    expect(lower.body.detail).toMatch(/max_tokens must be higher than the run's current 300/);
    const raised = await platform.http('POST', `/runs/${runId}/raise-budget`, { org: spender, body: { max_tokens: 100_000 } });
    expect(raised.status).toBe(202);
    await platform.waitForStatus(spender, runId, 'done');
    const events = await eventsOf(runId, spender);
    expect(events.filter((e) => e.type === 'budget_raised').map((e) => e.payload.previous)).toEqual([{ max_tokens: 300 }]);
    const calls = (await stepsOf(runId, spender)).filter((s) => s.kind === 'llm');
    const run = await platform.http('GET', `/runs/${runId}`, { org: spender });
    expect(run.body.state).toMatchObject({ status: 'done', budget: { max_tokens: 100_000 }, usage: { calls: calls.length } });
    // One reservation per call, each settled to what the call used.
    const reservations = await platform.query<{ key: string; settled: boolean; tokens: string }>('SELECT key, settled, tokens::text FROM budget_reservations WHERE org = $1 AND run_id = $2 ORDER BY created_at', [spender, runId]);
    expect(reservations.map((r) => [r.settled, Number(r.tokens)])).toEqual(calls.map((c) => [true, tokensOf(c.usage)]));
    expect(new Set(reservations.map((r) => r.key)).size).toBe(reservations.length);
  });

  it("an org's monthly budget pauses its runs (npm run budget), refuses a raise past it, and resume goes on once it is raised", async () => {
    const spender = uniqueId('orgbudget');
    const db = stackUrls().databaseUrl(platform.database);
    expect(await budgetCli(db, 'set', '--org', spender, '--monthly-usd', '0.000001')).toMatchObject({ code: 0, stdout: `org ${spender}: monthly budget $0.000001\n` });
    expect((await budgetCli(db, 'set', '--org', spender, '--monthly-usd', '-3')).code).toBe(2);
    const runId = await runWith('agent', 12, spender);
    await platform.waitForStatus(spender, runId, 'paused');
    const exhausted = (await eventsOf(runId, spender)).find((e) => e.type === 'budget_exhausted');
    expect(exhausted?.payload).toMatchObject({ scope: 'org', limit: 'usd', max: 0.000001, spent: 0, step: 0 });
    const refused = await platform.http('POST', `/runs/${runId}/raise-budget`, { org: spender, body: { max_cost_usd: 5 } });
    expect(refused.status).toBe(422);
    expect(refused.body.detail).toMatch(/monthly budget of \$0.000001/);
    expect(await budgetCli(db, 'set', '--org', spender, '--monthly-usd', '10')).toMatchObject({ code: 0 });
    expect((await platform.http('POST', `/runs/${runId}/resume`, { org: spender })).status).toBe(202);
    await platform.waitForStatus(spender, runId, 'done');
    const listed = await budgetCli(db, 'list', '--org', spender);
    const run = await platform.http('GET', `/runs/${runId}`, { org: spender });
    expect(listed.stdout).toContain(`${spender}\tmonthly $10\tspent $${run.body.state.usage.cost_usd}\treserved $0`);
    expect(await budgetCli(db, 'clear', '--org', spender)).toMatchObject({ code: 0, stdout: `org ${spender}: budget cleared\n` });
  });

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
