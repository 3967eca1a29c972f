import { TOPICS, type CommandOutcome, type DlqRecord, type RunEventEnvelope } from '@agentrun/contracts';
import { Client, Connection } from '@temporalio/client';
import { statusQuery } from '@agentrun/workflows';
import { stackUrls } from '../support/stack-env';
import { oneToN, partitionsOf, scriptedRunShape, seqsOnTopic } from '../support/invariants';
import { Platform, uniqueId, type TopicRecord } from '../support/platform';
import { SseClient } from '../support/sse';
import { waitFor } from '../support/wait';

describe('commands published to Kafka by an outside system', () => {
  // A short history budget, so a longer run crosses executions by continue-as-new.
  const platform = new Platform({ AGENTRUN_STEPS_PER_EXECUTION: '10' });
  let events: TopicRecord<RunEventEnvelope>[];
  let outcomes: TopicRecord<CommandOutcome>[];
  let dlq: TopicRecord<DlqRecord>[];

  beforeAll(async () => {
    await platform.start();
    events = await platform.follow<RunEventEnvelope>(TOPICS.runEvents);
    outcomes = await platform.follow<CommandOutcome>(TOPICS.commandResults);
    dlq = await platform.follow<DlqRecord>(TOPICS.commandsDlq);
  });
  afterAll(() => platform.stop());

  const outcomesOf = (org: string, commandId: string) =>
    outcomes.filter((o) => o.value.org === org && o.value.command_id === commandId).map((o) => o.value);

  it('an agent.start runs to done, and the topic, the runs row and the SSE stream agree on seqs 1..N', async () => {
    const org = 'acme';
    const runId = uniqueId('agent');
    await platform.publishCommand({ command_id: uniqueId('c'), type: 'agent.start', org, run_id: runId, payload: { goal: 'summarise the workspace', max_steps: 6 } });
    await platform.waitForStatus(org, runId, 'done');

    const [row] = await platform.query<{ status: string; last_seq: number; kind: string; state: { step: number } }>(
      'SELECT status, last_seq, kind, state FROM runs WHERE org = $1 AND run_id = $2',
      [org, runId],
    );
    expect(row.kind).toBe('agent');
    expect(row.state.step).toBe(6);
    const n = row.last_seq;
    expect(n).toBe(scriptedRunShape(6).events);

    await waitFor('every event on the topic', () => seqsOnTopic(events, org, runId).length === n);
    expect(seqsOnTopic(events, org, runId)).toEqual(oneToN(n));
    expect(partitionsOf(events, org, runId)).toHaveLength(1);

    const stored = await platform.query<{ seq: number }>('SELECT seq FROM run_events WHERE org = $1 AND run_id = $2 ORDER BY seq', [org, runId]);
    expect(stored.map((r) => r.seq)).toEqual(oneToN(n));

    const sse = new SseClient(`${platform.gatewayUrl}/runs/${runId}/events`, { 'X-Org': org });
    await sse.finished();
    expect(sse.status).toBe(200);
    expect(sse.events().map((e) => e.seq)).toEqual(oneToN(n));
    expect(sse.frames[sse.frames.length - 1].event).toBe('end');
    expect(sse.events()[n - 1].payload.state?.status).toBe('done');
  });

  it('a run longer than the history budget continues as new and keeps one seq sequence', async () => {
    const org = 'acme';
    const runId = uniqueId('long');
    await platform.publishCommand({ command_id: uniqueId('c'), type: 'agent.start', org, run_id: runId, payload: { goal: 'go the distance', max_steps: 25 } });
    await platform.waitForStatus(org, runId, 'done');
    const n = scriptedRunShape(25).events;
    await waitFor('every event on the topic', () => seqsOnTopic(events, org, runId).length === n);
    expect(seqsOnTopic(events, org, runId)).toEqual(oneToN(n));
    const connection = await Connection.connect({ address: stackUrls().temporalAddress });
    try {
      const client = new Client({ connection, namespace: stackUrls().namespace });
      const status = await client.workflow.getHandle(`${org}/${runId}`).query(statusQuery);
      // The last of three executions started at step 20 and carried the seq counter.
      expect(status).toMatchObject({ execution_started_at_step: 20, step: 25, last_seq: n, status: 'done' });
      expect(status.children).toEqual([`${org}/${runId}/research/3`, `${org}/${runId}/research/19`]);
    } finally {
      await connection.close();
    }
  });

  it('a Temporal cancellation still publishes the run\'s last events, ending in cancelled', async () => {
    const org = 'acme';
    const runId = uniqueId('tcancel');
    await platform.publishCommand({ command_id: uniqueId('c'), type: 'agent.start', org, run_id: runId, payload: { goal: 'be cancelled', max_steps: 400 } });
    await platform.waitForStatus(org, runId, 'running');
    const connection = await Connection.connect({ address: stackUrls().temporalAddress });
    try {
      const client = new Client({ connection, namespace: stackUrls().namespace });
      await client.workflow.getHandle(`${org}/${runId}`).cancel();
    } finally {
      await connection.close();
    }
    await platform.waitForStatus(org, runId, 'cancelled');
    const sse = new SseClient(`${platform.gatewayUrl}/runs/${runId}/events`, { 'X-Org': org });
    await sse.finished();
    const seqs = sse.events().map((e) => e.seq);
    expect(seqs).toEqual(oneToN(seqs.length));
    expect(sse.frames[sse.frames.length - 1].event).toBe('end');
  });

  it('the same command twice gives one run, one set of events, and outcomes accepted then duplicate', async () => {
    const org = 'acme';
    const runId = uniqueId('agent');
    const command = { command_id: uniqueId('c'), type: 'agent.start', org, run_id: runId, payload: { goal: 'once only', max_steps: 2 } };
    await platform.publishCommand(command);
    await platform.publishCommand(command);
    await waitFor('two outcomes', () => outcomesOf(org, command.command_id).length === 2);
    expect(outcomesOf(org, command.command_id).map((o) => o.outcome)).toEqual(['accepted', 'duplicate']);
    await platform.waitForStatus(org, runId, 'done');
    const [{ n }] = await platform.query<{ n: string }>('SELECT count(*) AS n FROM runs WHERE org = $1 AND run_id = $2', [org, runId]);
    expect(Number(n)).toBe(1);
    const [ledger] = await platform.query<{ outcome: string }>('SELECT outcome FROM command_ledger WHERE org = $1 AND command_id = $2', [org, command.command_id]);
    expect(ledger.outcome).toBe('accepted');
    expect(seqsOnTopic(events, org, runId)).toEqual(oneToN(4));
  });

  it('a second start with a new command id for an existing run is rejected as run_exists', async () => {
    const org = 'acme';
    const runId = uniqueId('agent');
    await platform.publishCommand({ command_id: uniqueId('c'), type: 'agent.start', org, run_id: runId, payload: { goal: 'first', max_steps: 1 } });
    await platform.waitForStatus(org, runId, 'done');
    const second = uniqueId('c');
    await platform.publishCommand({ command_id: second, type: 'agent.start', org, run_id: runId, payload: { goal: 'second', max_steps: 1 } });
    const [outcome] = await waitFor('an outcome', () => outcomesOf(org, second).length > 0 && outcomesOf(org, second));
    expect(outcome).toMatchObject({ outcome: 'rejected', reason: 'run_exists' });
  });

  it('a poison message lands in the DLQ with its bytes and reason, and a valid command after it still runs', async () => {
    const org = 'acme';
    const runId = uniqueId('agent');
    const poison = Buffer.from('{"command_id": "c-1", "type": "agent.start", org: not json');
    // Same key, so the same partition: the valid command waits behind the poison one.
    await platform.publishCommands([
      { key: runId, value: poison },
      { key: runId, value: 'x'.repeat(70 * 1024) },
      { key: runId, value: JSON.stringify({ type: 'agent.start', org, run_id: runId, payload: { goal: 'no id' } }) },
      { key: runId, value: JSON.stringify({ command_id: uniqueId('c'), type: 'agent.start', org, run_id: runId, payload: { goal: 'after poison', max_steps: 1 } }) },
    ]);
    await platform.waitForStatus(org, runId, 'done');
    await waitFor('three DLQ records', () => dlq.filter((d) => d.key === runId).length === 3);
    const records = dlq.filter((d) => d.key === runId).map((d) => d.value);
    expect(records.map((r) => r.reason)).toEqual(['not_json', 'too_large', 'not_a_command']);
    expect(Buffer.from(records[0].original_base64, 'base64')).toEqual(poison);
    expect(records[0].source.topic).toBe(platform.topic(TOPICS.commands));
    expect(records[1].detail).toMatch(/65536/);
  });

  it('an invalid payload is rejected with a reason, not dead-lettered', async () => {
    const org = 'acme';
    const commandId = uniqueId('c');
    await platform.publishCommand({ command_id: commandId, type: 'agent.start', org, run_id: uniqueId('agent'), payload: { goal: '', max_steps: 0 } });
    const [outcome] = await waitFor('an outcome', () => outcomesOf(org, commandId).length > 0 && outcomesOf(org, commandId));
    expect(outcome.outcome).toBe('rejected');
    expect(outcome.reason).toBe('invalid_payload');
    expect(outcome.message).toMatch(/goal/);
  });

  it('a control command for a run that does not exist is rejected as unknown_run', async () => {
    const commandId = uniqueId('c');
    await platform.publishCommand({ command_id: commandId, type: 'agent.pause', org: 'acme', run_id: uniqueId('nobody'), payload: {} });
    const [outcome] = await waitFor('an outcome', () => outcomesOf('acme', commandId).length > 0 && outcomesOf('acme', commandId));
    expect(outcome).toMatchObject({ outcome: 'rejected', reason: 'unknown_run' });
  });

  it("another org's run is indistinguishable from no run over Kafka", async () => {
    const runId = uniqueId('agent');
    await platform.publishCommand({ command_id: uniqueId('c'), type: 'agent.start', org: 'acme', run_id: runId, payload: { goal: 'mine', max_steps: 30 } });
    const commandId = uniqueId('c');
    await platform.publishCommand({ command_id: commandId, type: 'agent.cancel', org: 'globex', run_id: runId, payload: {} });
    const [outcome] = await waitFor('an outcome', () => outcomesOf('globex', commandId).length > 0 && outcomesOf('globex', commandId));
    expect(outcome).toMatchObject({ outcome: 'rejected', reason: 'unknown_run' });
    await platform.waitForStatus('acme', runId, 'done');
  });

  it('two orgs using the same run id get two runs', async () => {
    const runId = uniqueId('shared');
    for (const org of ['acme', 'globex']) {
      await platform.publishCommand({ command_id: uniqueId('c'), type: 'agent.start', org, run_id: runId, payload: { goal: `goal of ${org}`, max_steps: 2 } });
    }
    await platform.waitForStatus('acme', runId, 'done');
    await platform.waitForStatus('globex', runId, 'done');
    const rows = await platform.query<{ org: string; state: { goal: string } }>('SELECT org, state FROM runs WHERE run_id = $1 ORDER BY org', [runId]);
    expect(rows.map((r) => [r.org, r.state.goal])).toEqual([
      ['acme', 'goal of acme'],
      ['globex', 'goal of globex'],
    ]);
  });

  it('pause and resume reach the workflow and come back as events', async () => {
    const org = 'acme';
    const runId = uniqueId('agent');
    await platform.publishCommand({ command_id: uniqueId('c'), type: 'agent.start', org, run_id: runId, payload: { goal: 'long one', max_steps: 400 } });
    await platform.waitForStatus(org, runId, 'running');
    await platform.publishCommand({ command_id: uniqueId('c'), type: 'agent.pause', org, run_id: runId, payload: {} });
    await platform.waitForStatus(org, runId, 'paused');
    await platform.publishCommand({ command_id: uniqueId('c'), type: 'agent.cancel', org, run_id: runId, payload: {} });
    await platform.waitForStatus(org, runId, 'cancelled');
    const statuses = (await platform.query<{ event: RunEventEnvelope }>('SELECT event FROM run_events WHERE org = $1 AND run_id = $2 ORDER BY seq', [org, runId])).map(
      (r) => r.event.payload.state?.status,
    );
    // A step in flight when a control arrives still completes, so a status may repeat; its changes may not.
    const changes = statuses.filter((status, i) => i === 0 || status !== statuses[i - 1]);
    expect(changes.slice(-3)).toEqual(['paused', 'cancelling', 'cancelled']);
  });
});
