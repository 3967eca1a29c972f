import { Client, Connection } from '@temporalio/client';
import type { RunConversation } from '@agentrun/contracts';
import { Platform, uniqueId } from '../support/platform';
import { stackUrls } from '../support/stack-env';
import { waitFor } from '../support/wait';

/**
 * An `llm` run's conversation, read back from its events: each `step_completed` carries the messages
 * its step added, so `GET /runs/{id}/conversation` is whole across continue-as-new (two steps an
 * execution here) and still answers after the workflow's histories are deleted from Temporal.
 */
describe("an llm run's conversation", () => {
  const platform = new Platform({ AGENTRUN_STEPS_PER_EXECUTION: '2' });
  const org = uniqueId('conv');
  let connection: Connection;
  let client: Client;
  beforeAll(async () => {
    await platform.start();
    connection = await Connection.connect({ address: stackUrls().temporalAddress });
    client = new Client({ connection, namespace: stackUrls().namespace });
  });
  afterAll(async () => {
    await connection?.close();
    await platform.stop();
  });

  it('is served from the events, whole across executions and after the histories are gone', async () => {
    const runId = uniqueId('llm');
    const goal = 'find the parser notes';
    expect((await platform.http('POST', '/agents', { org, body: { run_id: runId, goal, max_steps: 8, policy: 'llm' } })).status).toBe(202);
    await platform.waitForStatus(org, runId, 'done');
    const detail = (await platform.http('GET', `/runs/${runId}`, { org })).body;
    const answer = detail.state.answer as string;
    expect(answer.length).toBeGreaterThan(0);

    const res = await platform.http('GET', `/runs/${runId}/conversation`, { org });
    expect(res.status).toBe(200);
    const conversation = res.body as RunConversation;
    expect(conversation).toMatchObject({ run_id: runId, status: 'done', answer });
    const { messages } = conversation;
    expect(messages.slice(0, 2).map((m) => [m.role, m.step])).toEqual([
      ['system', 0],
      ['user', 0],
    ]);
    expect(messages[1].content).toBe(goal);
    // Every tool call is answered by its result, in order, and the last message is the answer.
    const calls = messages.flatMap((m) => (m.tool_calls ?? []).map((c) => c.id));
    const results = messages.filter((m) => m.role === 'tool').map((m) => m.tool_call_id);
    expect(calls.length).toBeGreaterThan(0);
    expect(results).toEqual(calls);
    for (const m of messages.filter((x) => x.tool_calls)) for (const c of m.tool_calls!) expect(() => JSON.parse(c.function.arguments)).not.toThrow();
    expect(messages.at(-1)).toMatchObject({ role: 'assistant', content: answer });
    const steps = messages.map((m) => m.step);
    expect(steps).toEqual([...steps].sort((a, b) => a - b));
    // Every step of the run said what it added: one message per tool step, one per model turn.
    expect(new Set(steps).size).toBe(detail.state.step);

    // The run continued as new; its histories are then deleted, as Temporal's retention would.
    const workflowId = `${org}/${runId}`;
    const executions: string[] = [];
    for await (const e of client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) executions.push(e.runId);
    expect(executions.length).toBeGreaterThanOrEqual(2);
    for (const execution of executions) {
      await connection.workflowService.deleteWorkflowExecution({ namespace: stackUrls().namespace, workflowExecution: { workflowId, runId: execution } });
    }
    const gone = async (execution: string) => client.workflow.getHandle(workflowId, execution).fetchHistory().then(() => false, () => true);
    await waitFor('the histories to be gone', async () => (await Promise.all(executions.map(gone))).every(Boolean), 150_000, 250);
    expect((await platform.http('GET', `/runs/${runId}/conversation`, { org })).body).toEqual(conversation);

    // Another org's run is the same 404 as none.
    expect((await platform.http('GET', `/runs/${runId}/conversation`, { org: 'globex' })).status).toBe(404);
  }, 240_000);
});
