import { WorkflowNotFoundError, WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import { ApplicationFailure, IllegalStateError, TypedSearchAttributes, WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { AGENT_STATUS_KEY, AgentRun, CURRENT_STEP_KEY, EvalRun, ORG_KEY, OWNER_KEY, RUN_KIND_KEY, RUN_PARENT_KEY, type AgentRunInput } from '@agentrun/workflows';
import { RunAlreadyStartedError, RunNotFoundError, TransientCommandError, UpdateRefusedError } from '../errors';
import type { StartRunRequest } from '../ports';
import { TemporalRunDirectory } from './temporal-run-directory';

// The SDK client replaced by jest mocks: what is checked is how our calls and the SDK's errors translate.
function clientDouble() {
  const handle = { describe: jest.fn(), signal: jest.fn(), executeUpdate: jest.fn(), query: jest.fn() };
  const workflow = { start: jest.fn().mockResolvedValue({ eagerlyStarted: false }), getHandle: jest.fn(() => handle) };
  const directory = new TemporalRunDirectory(() => ({ workflow }) as unknown as Client);
  return { directory, workflow, handle };
}

const unavailable = () => Object.assign(new Error('14 UNAVAILABLE: No connection established'), { code: 14 });

const agentStart: StartRunRequest = {
  org: 'acme',
  runId: 'run-1',
  commandId: 'c-1',
  taskQueue: 'q-agent-workflows',
  workflow: { kind: 'agent', input: { run_id: 'run-1' } as AgentRunInput },
  memo: { tier: 'batch' },
  attributes: { current_step: 0, parent_run_id: 'parent', owner: 'dana' },
};

describe('TemporalRunDirectory', () => {
  it('starts the workflow under {org}/{run_id} with the start command in its memo and typed attributes', async () => {
    const { directory, workflow } = clientDouble();

    await directory.start(agentStart);

    expect(workflow.start).toHaveBeenCalledWith(AgentRun, {
      workflowId: 'acme/run-1',
      taskQueue: 'q-agent-workflows',
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      workflowIdConflictPolicy: 'FAIL',
      memo: { tier: 'batch', start_command_id: 'c-1' },
      typedSearchAttributes: [
        { key: ORG_KEY, value: 'acme' },
        { key: RUN_KIND_KEY, value: 'agent' },
        { key: AGENT_STATUS_KEY, value: 'queued' },
        { key: CURRENT_STEP_KEY, value: 0 },
        { key: RUN_PARENT_KEY, value: 'parent' },
        { key: OWNER_KEY, value: 'dana' },
      ],
      args: [agentStart.workflow.input],
    });
  });

  it("starts through the local workers' client, asking for an eager start, while it is there; through the server's otherwise", async () => {
    const plain = { start: jest.fn().mockResolvedValue({ eagerlyStarted: false }) };
    const local = { start: jest.fn().mockResolvedValue({ eagerlyStarted: true }) };
    let running = true;
    const directory = new TemporalRunDirectory(
      () => ({ workflow: plain }) as unknown as Client,
      () => (running ? ({ workflow: local } as unknown as Client) : undefined),
    );

    await directory.start(agentStart);
    expect(local.start).toHaveBeenCalledWith(AgentRun, expect.objectContaining({ workflowId: 'acme/run-1', requestEagerStart: true }));
    expect(plain.start).not.toHaveBeenCalled();

    running = false; // the workers began to stop
    await directory.start(agentStart);
    expect(plain.start).toHaveBeenCalledTimes(1);
    expect(plain.start.mock.calls[0][1]).not.toHaveProperty('requestEagerStart');
  });

  it("starts through the server's client when the local workers' connection closed under the start", async () => {
    const plain = { start: jest.fn().mockResolvedValue({ eagerlyStarted: false }) };
    const local = { start: jest.fn().mockRejectedValue(new IllegalStateError('Client already closed')) };
    const directory = new TemporalRunDirectory(
      () => ({ workflow: plain }) as unknown as Client,
      () => ({ workflow: local }) as unknown as Client,
    );

    await directory.start(agentStart);
    expect(local.start).toHaveBeenCalledTimes(1);
    expect(plain.start).toHaveBeenCalledTimes(1);
    expect(plain.start.mock.calls[0][1]).not.toHaveProperty('requestEagerStart');

    // Any other failure of the local start is the start's answer, as through the server's client.
    local.start.mockRejectedValueOnce(new WorkflowExecutionAlreadyStartedError('taken', 'acme/run-1', 'AgentRun'));
    await expect(directory.start(agentStart)).rejects.toBeInstanceOf(RunAlreadyStartedError);
    expect(plain.start).toHaveBeenCalledTimes(1);
  });

  it('starts an EvalRun for an eval request', async () => {
    const { directory, workflow } = clientDouble();

    await directory.start({ ...agentStart, workflow: { kind: 'eval', input: agentStart.workflow.input as never }, attributes: {} });

    expect(workflow.start).toHaveBeenCalledWith(EvalRun, expect.objectContaining({ typedSearchAttributes: [expect.anything(), { key: RUN_KIND_KEY, value: 'eval' }, expect.anything()] }));
  });

  it('names a taken workflow id RunAlreadyStartedError', async () => {
    const { directory, workflow } = clientDouble();
    workflow.start.mockRejectedValue(new WorkflowExecutionAlreadyStartedError('already started', 'acme/run-1', 'AgentRun'));

    await expect(directory.start(agentStart)).rejects.toBeInstanceOf(RunAlreadyStartedError);
  });

  it('describes a run by its kind, execution status, published status and start command', async () => {
    const { directory, handle } = clientDouble();
    handle.describe.mockResolvedValue({
      type: 'EvalRun',
      status: { name: 'COMPLETED' },
      memo: { model: 'm', start_command_id: 'c-9' },
      typedSearchAttributes: new TypedSearchAttributes([{ key: AGENT_STATUS_KEY, value: 'published' }]),
    });

    await expect(directory.describe('acme', 'ev-1')).resolves.toEqual({
      kind: 'eval',
      execution: 'completed',
      status: 'published',
      startCommandId: 'c-9',
      memo: { model: 'm', start_command_id: 'c-9' },
    });
  });

  it('shows a workflow that is not a run as having no kind', async () => {
    const { directory, handle } = clientDouble();
    handle.describe.mockResolvedValue({ type: 'ResearchAgent', status: { name: 'RUNNING' }, typedSearchAttributes: new TypedSearchAttributes() });

    await expect(directory.describe('acme', 'r')).resolves.toMatchObject({ kind: undefined, memo: {}, startCommandId: undefined, status: undefined });
  });

  it('describes an unknown run as undefined', async () => {
    const { directory, handle } = clientDouble();
    handle.describe.mockRejectedValue(new WorkflowNotFoundError('not found', 'acme/nope', undefined));

    await expect(directory.describe('acme', 'nope')).resolves.toBeUndefined();
  });

  it('turns an unreachable server into TransientCommandError on every call', async () => {
    const { directory, workflow, handle } = clientDouble();
    workflow.start.mockRejectedValue(unavailable());
    handle.describe.mockRejectedValue(unavailable());
    handle.signal.mockRejectedValue(new Error('connect ECONNREFUSED 127.0.0.1:7233'));
    handle.executeUpdate.mockRejectedValue(Object.assign(new Error('deadline'), { code: 4 }));
    handle.query.mockRejectedValue(unavailable());

    await expect(directory.start(agentStart)).rejects.toBeInstanceOf(TransientCommandError);
    await expect(directory.describe('acme', 'run-1')).rejects.toBeInstanceOf(TransientCommandError);
    await expect(directory.signal('acme', 'run-1', { name: 'pause', command_id: 'c' })).rejects.toBeInstanceOf(TransientCommandError);
    await expect(directory.update('acme', 'run-1', { name: 'change_goal', command_id: 'c', goal: 'g' })).rejects.toBeInstanceOf(TransientCommandError);
    await expect(directory.evalStatus('acme', 'run-1')).rejects.toBeInstanceOf(TransientCommandError);
  });

  it('leaves an error that is neither unreachable nor known as it is', async () => {
    const { directory, handle } = clientDouble();
    const invalid = Object.assign(new Error('invalid argument'), { code: 3 });
    handle.signal.mockRejectedValue(invalid);

    await expect(directory.signal('acme', 'run-1', { name: 'pause', command_id: 'c' })).rejects.toBe(invalid);
  });

  it('signals with the definition the signal names', async () => {
    const { directory, handle, workflow } = clientDouble();

    await directory.signal('acme', 'run-1', { name: 'inject_context', command_id: 'c', text: 'hint' });
    await directory.signal('acme', 'ev-1', { name: 'cancel_eval', command_id: 'd' });

    expect(workflow.getHandle.mock.calls).toEqual([['acme/run-1'], ['acme/ev-1']]);
    expect(handle.signal.mock.calls.map(([definition, arg]) => [(definition as { name: string }).name, arg])).toEqual([
      ['inject_context', { command_id: 'c', text: 'hint' }],
      ['cancel_eval', { command_id: 'd' }],
    ]);
  });

  it('names a closed run RunNotFoundError when signalled', async () => {
    const { directory, handle } = clientDouble();
    handle.signal.mockRejectedValue(new WorkflowNotFoundError('workflow execution already completed', 'acme/run-1', undefined));

    await expect(directory.signal('acme', 'run-1', { name: 'resume', command_id: 'c' })).rejects.toBeInstanceOf(RunNotFoundError);
  });

  it('sends an update with the command id as its update id and answers what the run answered', async () => {
    const { directory, handle } = clientDouble();
    handle.executeUpdate.mockResolvedValue('approved by alice');

    await expect(directory.update('acme', 'ev-1', { name: 'approve', command_id: 'c-7', reviewer: 'alice' })).resolves.toBe('approved by alice');
    const [definition, options] = handle.executeUpdate.mock.calls[0] as [{ name: string }, unknown];
    expect(definition.name).toBe('approve');
    expect(options).toEqual({ args: [{ command_id: 'c-7', reviewer: 'alice' }], updateId: 'c-7' });
  });

  it("names a validator's refusal UpdateRefusedError with the validator's message", async () => {
    const { directory, handle } = clientDouble();
    handle.executeUpdate.mockRejectedValue(new WorkflowUpdateFailedError('Workflow Update failed', ApplicationFailure.create({ message: 'goal is unchanged' })));

    const refusal = directory.update('acme', 'run-1', { name: 'change_goal', command_id: 'c', goal: 'g' });

    await expect(refusal).rejects.toBeInstanceOf(UpdateRefusedError);
    await expect(refusal).rejects.toThrow('goal is unchanged');
  });
});
