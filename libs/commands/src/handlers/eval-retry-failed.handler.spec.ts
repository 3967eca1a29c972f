import { lanesFor } from '@agentrun/contracts';
import type { AgentCaseTemplate, CaseSpec, EvalRunState } from '@agentrun/workflows';
import { TransientCommandError } from '../errors';
import { commandOf, serviceWithFakes } from '../testing/service-with-fakes';

function finished(over: Partial<EvalRunState> = {}): EvalRunState {
  return {
    status: 'awaiting_review',
    model: 'state-model',
    suite: 'state-suite',
    total: 4,
    done: 4,
    counts: { ok: 2, failed: 1, ungraded: 1 },
    score: 0.66,
    cases: { 'case-001': { status: 'ok' }, 'case-002': { status: 'failed' }, 'case-003': { status: 'ok' }, 'case-004': { status: 'ungraded' } },
    reviewers: ['alice', 'bob'],
    ...over,
  };
}

function withEval(state: EvalRunState) {
  const fakes = serviceWithFakes('t3-');
  fakes.runs.add('acme', 'ev-1', { kind: 'eval', execution: 'completed', status: state.status, memo: { model: 'm-1', suite: 'smoke' }, evalState: state });
  return fakes;
}

describe('eval.retry_failed', () => {
  it('starts {id}-retry-1 over the failed and ungraded cases, as a child of the run', async () => {
    const { service, runs, ledger } = withEval(finished());
    const command = commandOf('eval.retry_failed', {}, { run_id: 'ev-1' });

    await expect(service.handle(command)).resolves.toMatchObject({ outcome: 'accepted', message: 'started ev-1-retry-1 over 2 cases: case-002, case-004' });

    const [request] = runs.started();
    expect(request).toMatchObject({ runId: 'ev-1-retry-1', commandId: command.command_id, memo: { model: 'm-1', suite: 'smoke', parent_run_id: 'ev-1' }, attributes: { parent_run_id: 'ev-1' } });
    expect(request?.workflow.input).toMatchObject({ run_id: 'ev-1-retry-1', model: 'm-1', suite: 'smoke', case_ids: ['case-002', 'case-004'], reviewers: ['alice', 'bob'], parent_run_id: 'ev-1' });
    // The retry's id is taken in the ledger like any started run.
    await expect(ledger.acceptedStart('acme', 'ev-1-retry-1')).resolves.toBe(`${command.command_id}#start`);
  });

  it("starts a retry's agent cases on this process's queues, not those saved with the eval", async () => {
    const { service, runs } = serviceWithFakes('t3-');
    const spec = { dataset: { id: 'ds-1', name: 'smoke', source: 'stored' }, solver: { name: 'agent' }, scorers: [{ name: 'exact' }], model: 'm-1' } as unknown as CaseSpec;
    // Saved by an all-roles orchestrator whose runs put their CPU tools on the workflow's own queue.
    const saved = { agentWorkflows: 'old-agent-workflows', cpuTools: 'old-agent-workflows', gpuTools: 'old-gpu-tools', snapshots: 'old-snapshots' };
    const agent = { max_steps: 4, policy: 'scripted', tier: 'batch', lanes: saved, model: 'm-1' } as unknown as AgentCaseTemplate;
    runs.add('acme', 'ev-1', { kind: 'eval', execution: 'completed', status: 'awaiting_review', memo: { model: 'm-1', suite: 'smoke', spec, agent }, evalState: finished() });

    await expect(service.handle(commandOf('eval.retry_failed', {}, { run_id: 'ev-1' }))).resolves.toMatchObject({ outcome: 'accepted' });

    const here = lanesFor('t3-');
    const input = runs.started()[0]?.workflow.input as { spec?: CaseSpec; agent?: AgentCaseTemplate };
    expect(input.spec).toEqual(spec);
    expect(input.agent).toMatchObject({ max_steps: 4, policy: 'scripted', model: 'm-1', lanes: { agentWorkflows: here.agentWorkflows, cpuTools: here.cpuTools, gpuTools: here.gpuTools, snapshots: here.snapshots } });
    expect(input.agent?.lanes.cpuTools).toBe('t3-cpu-tools');
  });

  it('takes the next free retry id', async () => {
    const { service, runs, ledger } = withEval(finished());
    ledger.accept('acme', 'first-retry#start', 'eval.start', 'ev-1-retry-1');
    runs.add('acme', 'ev-1-retry-2', { kind: 'eval', startCommandId: 'someone' });

    await expect(service.handle(commandOf('eval.retry_failed', {}, { run_id: 'ev-1' }))).resolves.toMatchObject({ outcome: 'accepted', message: expect.stringContaining('ev-1-retry-3') });
    expect(runs.started().map((r) => r.runId)).toEqual(['ev-1-retry-2', 'ev-1-retry-3']);
  });

  it('falls back to the run state for model and suite when the memo lacks them', async () => {
    const { service, runs } = serviceWithFakes();
    runs.add('acme', 'ev-1', { kind: 'eval', execution: 'completed', status: 'failed', evalState: finished({ status: 'failed' }) });

    await service.handle(commandOf('eval.retry_failed', {}, { run_id: 'ev-1' }));

    expect(runs.started()[0]?.workflow.input).toMatchObject({ model: 'state-model', suite: 'state-suite' });
  });

  it('rejects a run that is still going with run_active', async () => {
    const { service, runs } = withEval(finished({ status: 'running' }));

    await expect(service.handle(commandOf('eval.retry_failed', {}, { run_id: 'ev-1' }))).resolves.toMatchObject({
      outcome: 'rejected',
      reason: 'run_active',
      message: "run 'ev-1' is still running; retry its failed cases when it has finished",
    });
    expect(runs.started()).toEqual([]);
  });

  it('rejects a run with nothing to retry', async () => {
    const { service } = withEval(finished({ cases: { 'case-001': { status: 'ok' } } }));

    await expect(service.handle(commandOf('eval.retry_failed', {}, { run_id: 'ev-1' }))).resolves.toMatchObject({ outcome: 'rejected', reason: 'nothing_to_retry' });
  });

  it('rejects an unknown run and an agent run', async () => {
    const { service, runs } = serviceWithFakes();
    runs.add('acme', 'agent-1', { kind: 'agent' });

    await expect(service.handle(commandOf('eval.retry_failed', {}, { run_id: 'ev-404' }))).resolves.toMatchObject({ outcome: 'rejected', reason: 'unknown_run' });
    await expect(service.handle(commandOf('eval.retry_failed', {}, { run_id: 'agent-1' }))).resolves.toMatchObject({ outcome: 'rejected', reason: 'wrong_kind' });
  });

  it('gives up when no retry id fits the run id pattern', async () => {
    const longId = `e${'x'.repeat(99)}`;
    const { service, runs } = serviceWithFakes();
    runs.add('acme', longId, { kind: 'eval', execution: 'completed', evalState: finished() });

    await expect(service.handle(commandOf('eval.retry_failed', {}, { run_id: longId }))).resolves.toMatchObject({
      outcome: 'rejected',
      reason: 'invalid_payload',
      message: `no free retry id for run '${longId}'`,
    });
  });

  it('releases its claim when the run state cannot be read', async () => {
    const { service, runs, ledger } = withEval(finished());
    runs.failNext('evalStatus', new TransientCommandError('temporal unavailable'));
    const command = commandOf('eval.retry_failed', {}, { run_id: 'ev-1' });

    await expect(service.handle(command)).rejects.toBeInstanceOf(TransientCommandError);
    expect(ledger.released).toEqual([`acme/${command.command_id}`]);
    expect(runs.started()).toEqual([]);
  });
});
