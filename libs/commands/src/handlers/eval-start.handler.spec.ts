import type { DatasetCatalogPort, ResolvedDataset } from '../ports';
import { TransientCommandError } from '../errors';
import { commandOf, serviceWithFakes, TEST_EVAL_DEFAULTS } from '../testing/service-with-fakes';

describe('eval.start', () => {
  it('starts an EvalRun over numbered cases with the platform defaults', async () => {
    const { service, runs } = serviceWithFakes('t2-');

    await expect(service.handle(commandOf('eval.start', { model: 'm-1', suite: 'smoke', cases: 3, reviewers: ['alice', 'bob'] }, { run_id: 'ev-1' }))).resolves.toMatchObject({ outcome: 'accepted' });

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

    await expect(service.handle(commandOf('eval.start', { model: 'm', suite: 's', reviewers: ['alice'] }))).resolves.toMatchObject({ outcome: 'rejected', reason: 'run_exists' });
  });

  it('refuses an eval without reviewers (absent or empty): there are no default reviewers, and nobody could approve it', async () => {
    for (const payload of [{ model: 'm', suite: 's', cases: 2 }, { model: 'm', suite: 's', cases: 2, reviewers: [] }]) {
      const { service, runs } = serviceWithFakes();
      await expect(service.handle(commandOf('eval.start', payload))).resolves.toMatchObject({
        outcome: 'rejected',
        reason: 'invalid_payload',
        message: expect.stringMatching(/^an eval needs at least one reviewer/),
      });
      expect(runs.started()).toHaveLength(0);
    }
  });

  it('releases its claim when the run directory is out of reach', async () => {
    const { service, ledger, runs } = serviceWithFakes();
    const command = commandOf('eval.start', { model: 'm', suite: 's', reviewers: ['alice'] });
    runs.failNext('start', new TransientCommandError('temporal unavailable'));

    await expect(service.handle(command)).rejects.toBeInstanceOf(TransientCommandError);
    expect(ledger.released).toEqual([`acme/${command.command_id}`]);
  });
});

describe('eval.start over a dataset', () => {
  const qa: ResolvedDataset = {
    ref: { id: 'a'.repeat(64), name: 'qa', source: 'shipped' },
    case_ids: ['q1', 'q2', 'q3'],
    solver: 'generate',
    scorers: [{ name: 'exact' }],
  };
  /** A catalogue that knows one suite and refuses anything else the way the real one words it. */
  const catalog: DatasetCatalogPort = {
    modelEndpoints: ['default', 'judge'],
    async resolve(_org, dataset) {
      return 'name' in dataset && dataset.name === 'qa' ? qa : { reason: 'unknown_dataset', message: `unknown dataset '${JSON.stringify(dataset)}'` };
    },
  };
  const start = (payload: Record<string, unknown>, runId = 'ev-d') => {
    const fakes = serviceWithFakes('t-', catalog);
    return { fakes, outcome: fakes.service.handle(commandOf('eval.start', { model: 'm', reviewers: ['alice'], ...payload } as never, { run_id: runId })) };
  };

  it("takes a suite's solver and scorers, and carries the checked spec to the workflow and its memo", async () => {
    const { fakes, outcome } = start({ dataset: { name: 'qa' } });
    await expect(outcome).resolves.toMatchObject({ outcome: 'accepted' });
    const [request] = fakes.runs.started();
    const spec = { dataset: qa.ref, solver: { name: 'generate' }, scorers: [{ name: 'exact' }], model: 'm' };
    expect(request?.workflow.input).toMatchObject({ suite: 'qa', case_ids: ['q1', 'q2', 'q3'], spec });
    expect(request?.memo).toMatchObject({ spec });
  });

  it('takes a subset by ids or by count, and refuses ids the dataset does not have', async () => {
    const byIds = start({ dataset: { name: 'qa' }, case_ids: ['q3', 'q1'] });
    await byIds.outcome;
    expect(byIds.fakes.runs.started()[0]?.workflow.input).toMatchObject({ case_ids: ['q3', 'q1'] });
    const byCount = start({ dataset: { name: 'qa' }, cases: 2 });
    await byCount.outcome;
    expect(byCount.fakes.runs.started()[0]?.workflow.input).toMatchObject({ case_ids: ['q1', 'q2'] });
    await expect(start({ dataset: { name: 'qa' }, case_ids: ['q9'] }).outcome).resolves.toMatchObject({ outcome: 'rejected', reason: 'invalid_eval', message: "dataset 'qa' has no case 'q9'" });
  });

  it('refuses unknown scorers, solvers, datasets and endpoints, saying what would do', async () => {
    const refusal = async (payload: Record<string, unknown>) => (await start(payload).outcome).message ?? '';
    await expect(start({ dataset: { name: 'nope' } }).outcome).resolves.toMatchObject({ reason: 'unknown_dataset' });
    await expect(start({ dataset: { name: 'qa' }, scorers: ['vibes'] }).outcome).resolves.toMatchObject({ reason: 'invalid_eval' });
    expect(await refusal({ dataset: { name: 'qa' }, scorers: ['vibes'] })).toMatch(/unknown scorer 'vibes'.*exact/);
    expect(await refusal({ dataset: { name: 'qa' }, solver: 'oracle' })).toMatch(/unknown solver 'oracle'.*generate/);
    expect(await refusal({ dataset: { name: 'nope' } })).toMatch(/unknown dataset/);
    expect(await refusal({ dataset: { name: 'qa' }, model_endpoint: 'elsewhere' })).toBe("unknown model endpoint 'elsewhere': the workers have default, judge");
    expect(await refusal({ dataset: { name: 'qa' }, solver: 'synthetic' })).toMatch(/synthetic.*without a dataset/);
    expect(await refusal({ suite: 's', cases: 2, scorers: ['exact'] })).toMatch(/scorers need a dataset/);
    expect(await refusal({ cases: 2 })).toBe('suite is required without a dataset');
  });

  it("gives the agent solver a case template: the eval's model, the llm policy, a final snapshot always", async () => {
    const { fakes, outcome } = start({ dataset: { name: 'qa' }, solver: { name: 'agent', max_steps: 5 }, snapshots: { per_turn: true, at_end: false } });
    await expect(outcome).resolves.toMatchObject({ outcome: 'accepted' });
    expect(fakes.runs.started()[0]?.workflow.input).toMatchObject({
      agent: { max_steps: 5, policy: 'llm', model: 'm', snapshots: { per_turn: true, at_end: true }, lanes: { agentWorkflows: 't-agent-workflows', snapshots: 't-snapshots' } },
    });
    const long = start({ dataset: { name: 'qa' }, solver: 'agent' }, 'e'.repeat(99));
    await expect(long.outcome).resolves.toMatchObject({ outcome: 'rejected', message: expect.stringMatching(/longer than a run id may be/) });
  });
});
