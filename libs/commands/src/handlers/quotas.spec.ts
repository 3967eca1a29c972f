import type { QuotaPort, StartLimits } from '../ports';
import { commandOf, serviceWithFakes } from '../testing/service-with-fakes';

/** An org `acme` with small limits and `active` runs held; every other org has room. */
function quotas(active: number, limits: Partial<StartLimits> = {}): QuotaPort & { counted: string[] } {
  const counted: string[] = [];
  return {
    counted,
    limits: (org) => (org === 'acme' ? { active_runs: 2, max_steps: 20, snapshots_per_run: 5, ...limits } : { active_runs: 100, max_steps: 1_000, snapshots_per_run: 200 }),
    activeRuns: async (org) => {
      counted.push(org);
      return org === 'acme' ? active : 0;
    },
  };
}

describe('quotas at the start of a run', () => {
  it('refuses a start that would take the org over its active runs, naming the limit', async () => {
    const { service, runs } = serviceWithFakes('unit-', undefined, quotas(2));
    const outcome = await service.handle(commandOf('agent.start', { goal: 'g' }));
    expect(outcome).toMatchObject({
      outcome: 'rejected',
      reason: 'quota_exceeded',
      message: 'org acme has 2 active runs, its limit (active_runs in AGENTRUN_QUOTAS) is 2: start again when one has finished',
    });
    expect(runs.started()).toEqual([]);
    // Another org is not held to acme's count.
    await expect(service.handle(commandOf('agent.start', { goal: 'g' }, { org: 'other' }))).resolves.toMatchObject({ outcome: 'accepted' });
  });

  it('admits a start below the limit, evals and forks alike', async () => {
    const port = quotas(1);
    const { service } = serviceWithFakes('unit-', undefined, port);
    await expect(service.handle(commandOf('agent.start', { goal: 'g' }))).resolves.toMatchObject({ outcome: 'accepted' });
    await expect(service.handle(commandOf('eval.start', { model: 'm', suite: 's', cases: 2, reviewers: ['alice'] }, { run_id: 'ev-1' }))).resolves.toMatchObject({ outcome: 'accepted' });
    expect(port.counted).toEqual(['acme', 'acme']);
  });

  it('refuses an eval when the org is full', async () => {
    const { service } = serviceWithFakes('unit-', undefined, quotas(5));
    await expect(service.handle(commandOf('eval.start', { model: 'm', suite: 's', cases: 2, reviewers: ['alice'] }, { run_id: 'ev-1' }))).resolves.toMatchObject({ outcome: 'rejected', reason: 'quota_exceeded' });
  });

  it('does not count again a start its own earlier attempt had accepted', async () => {
    const port = quotas(2);
    const { service, ledger } = serviceWithFakes('unit-', undefined, port);
    const command = commandOf('agent.start', { goal: 'g' });
    ledger.accept('acme', command.command_id, 'agent.start', 'run-1');
    await expect(service.handle(command)).resolves.not.toMatchObject({ reason: 'quota_exceeded' });
    expect(port.counted).toEqual([]);
  });

  it('accepts, at the limit, a run its own earlier attempt started before the decision was recorded', async () => {
    const { service, runs } = serviceWithFakes('unit-', undefined, quotas(2));
    const command = commandOf('agent.start', { goal: 'g' });
    runs.add('acme', 'run-1', { kind: 'agent', startCommandId: command.command_id });
    await expect(service.handle(command)).resolves.toMatchObject({ outcome: 'accepted' });
  });

  it('refuses max_steps over the org limit and lowers the default to it', async () => {
    const { service, runs } = serviceWithFakes('unit-', undefined, quotas(0, { max_steps: 5 }));
    await expect(service.handle(commandOf('agent.start', { goal: 'g', max_steps: 6 }))).resolves.toMatchObject({
      outcome: 'rejected',
      reason: 'quota_exceeded',
      message: "max_steps 6 is over org acme's limit of 5 (max_steps in AGENTRUN_QUOTAS)",
    });
    await expect(service.handle(commandOf('agent.start', { goal: 'g' }, { run_id: 'run-2' }))).resolves.toMatchObject({ outcome: 'accepted' });
    expect(runs.started()[0]?.workflow.input).toMatchObject({ max_steps: 5 });
  });

  it('refuses max_snapshots over snapshots_per_run and lowers the default to it', async () => {
    const { service, runs } = serviceWithFakes('unit-', undefined, quotas(0));
    await expect(service.handle(commandOf('agent.start', { goal: 'g', snapshots: { per_turn: true, max_snapshots: 6 } }))).resolves.toMatchObject({
      outcome: 'rejected',
      reason: 'quota_exceeded',
      message: "snapshots.max_snapshots 6 is over org acme's limit of 5 snapshots per run (snapshots_per_run in AGENTRUN_QUOTAS)",
    });
    await expect(service.handle(commandOf('agent.start', { goal: 'g', snapshots: { per_turn: true } }, { run_id: 'run-2' }))).resolves.toMatchObject({ outcome: 'accepted' });
    expect(runs.started()[0]?.workflow.input).toMatchObject({ snapshots: { max_snapshots: 5 } });
  });
});
