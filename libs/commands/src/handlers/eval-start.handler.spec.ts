import { TransientCommandError } from '../errors';
import { commandOf, serviceWithFakes, TEST_EVAL_DEFAULTS } from '../testing/service-with-fakes';

describe('eval.start', () => {
  it('starts an EvalRun over numbered cases with the platform defaults', async () => {
    const { service, runs } = serviceWithFakes('t2-');

    await expect(service.handle(commandOf('eval.start', { model: 'm-1', suite: 'smoke', cases: 3 }, { run_id: 'ev-1' }))).resolves.toMatchObject({ outcome: 'accepted' });

    const [request] = runs.started();
    expect(request).toMatchObject({ runId: 'ev-1', taskQueue: 't2-agent-workflows', memo: { model: 'm-1', suite: 'smoke' }, attributes: {} });
    expect(request?.workflow).toEqual({
      kind: 'eval',
      input: {
        org: 'acme',
        run_id: 'ev-1',
        model: 'm-1',
        suite: 'smoke',
        case_ids: ['case-001', 'case-002', 'case-003'],
        fail_fraction: 0.25,
        reviewers: ['alice', 'bob'],
        lanes: { agentWorkflows: 't2-agent-workflows', gpuEval: 't2-gpu-eval' },
        ...TEST_EVAL_DEFAULTS,
      },
    });
  });

  it('runs the cases the command names', async () => {
    const { service, runs } = serviceWithFakes();

    await service.handle(commandOf('eval.start', { model: 'm', suite: 's', case_ids: ['x', 'y'], cases: 5, reviewers: ['carol'], fail_fraction: 0 }));

    expect(runs.started()[0]?.workflow.input).toMatchObject({ case_ids: ['x', 'y'], reviewers: ['carol'], fail_fraction: 0 });
  });

  it('rejects a run id an agent start already took', async () => {
    const { service, ledger } = serviceWithFakes();
    ledger.accept('acme', 'earlier', 'agent.start', 'run-1');

    await expect(service.handle(commandOf('eval.start', { model: 'm', suite: 's' }))).resolves.toMatchObject({ outcome: 'rejected', reason: 'run_exists' });
  });

  it('releases its claim when the run directory is out of reach', async () => {
    const { service, ledger, runs } = serviceWithFakes();
    const command = commandOf('eval.start', { model: 'm', suite: 's' });
    runs.failNext('start', new TransientCommandError('temporal unavailable'));

    await expect(service.handle(command)).rejects.toBeInstanceOf(TransientCommandError);
    expect(ledger.released).toEqual([`acme/${command.command_id}`]);
  });
});
