import type { SnapshotRow } from '@agentrun/contracts';
import { TransientCommandError } from '../errors';
import { commandOf, serviceWithFakes } from '../testing/service-with-fakes';

function usableRow(over: Partial<SnapshotRow> = {}): SnapshotRow {
  return {
    snapshot_id: 'snap-0002',
    bundle_object_url: 's3://bucket/acme/parent/snap-0002.tar.gz',
    source_agent_name: 'agent',
    source_context_id: 'acme/parent',
    elapsed_s: 12,
    captured_at_utc: '2026-06-01T11:00:00Z',
    is_final: false,
    capture_status: 'ok',
    env_universe_id: 's3://bucket/acme/parent/snap-0002.state.json',
    step: 4,
    ...over,
  };
}

const PARENT_STATE = { goal: 'parent goal', max_steps: 12, policy: 'llm', tier: 'team', owner: 'dana', step: 4 };

function withParent(row = usableRow(), state: Record<string, unknown> | null = PARENT_STATE) {
  const fakes = serviceWithFakes('t4-');
  fakes.snapshots.addRun('acme', 'parent', 'agent');
  fakes.snapshots.addSnapshot('acme', 'parent', row, state);
  return fakes;
}

const fork = (over: { goal?: string } = {}) => commandOf('agent.fork', { from_run_id: 'parent', snapshot_id: 'snap-0002', ...over }, { run_id: 'child' });

describe('agent.fork', () => {
  it("starts a run from the snapshot with the parent's settings, at the snapshot's step", async () => {
    const { service, runs } = withParent();

    await expect(service.handle(fork())).resolves.toMatchObject({ outcome: 'accepted', message: "forked from snapshot 'snap-0002' of run 'parent' at step 4" });

    const [request] = runs.started();
    expect(request).toMatchObject({
      runId: 'child',
      memo: { tier: 'team', max_steps: 12, parent_run_id: 'parent', forked_from_snapshot: 'snap-0002' },
      attributes: { current_step: 4, parent_run_id: 'parent', owner: 'dana' },
    });
    expect(request?.workflow.input).toMatchObject({
      run_id: 'child',
      goal: 'parent goal',
      max_steps: 12,
      policy: 'llm',
      tier: 'team',
      parent_run_id: 'parent',
      fork: { from_run_id: 'parent', from_workflow_id: 'acme/parent', snapshot_id: 'snap-0002' },
    });
  });

  it('gives the child the goal the command names', async () => {
    const { service, runs } = withParent();

    await service.handle(fork({ goal: 'a new goal' }));

    expect(runs.started()[0]?.workflow.input).toMatchObject({ goal: 'a new goal', fork: { goal: 'a new goal' } });
  });

  it('forks a parent the run directory has forgotten: the manifest is the authority', async () => {
    const { service, runs } = withParent();

    await expect(service.handle(fork())).resolves.toMatchObject({ outcome: 'accepted' });
    expect(runs.calls.filter((c) => c.method === 'describe')).toEqual([]);
  });

  it('rejects a parent the org does not have', async () => {
    const { service, runs } = serviceWithFakes();
    const outcome = await service.handle(fork());

    expect(outcome).toMatchObject({ outcome: 'rejected', reason: 'unknown_run', message: "org acme has no run 'parent'" });
    expect(runs.started()).toEqual([]);
  });

  it('rejects an eval run as the parent', async () => {
    const { service, snapshots } = serviceWithFakes();
    snapshots.addRun('acme', 'parent', 'eval');

    await expect(service.handle(fork())).resolves.toMatchObject({ outcome: 'rejected', reason: 'wrong_kind' });
  });

  it('rejects a snapshot the parent does not have', async () => {
    const { service } = withParent(usableRow({ snapshot_id: 'snap-0001' }));

    await expect(service.handle(fork())).resolves.toMatchObject({ outcome: 'rejected', reason: 'unknown_snapshot', message: "run 'parent' has no snapshot 'snap-0002'" });
  });

  it('rejects a snapshot whose workspace archive never landed', async () => {
    const { service, runs } = withParent(usableRow({ bundle_object_url: undefined, capture_status: 'failed', capture_reason: 'upload timed out' }));

    await expect(service.handle(fork())).resolves.toMatchObject({
      outcome: 'rejected',
      reason: 'snapshot_unusable',
      message: "snapshot 'snap-0002' of run 'parent' cannot be forked: no workspace archive landed (failed: upload timed out)",
    });
    expect(runs.started()).toEqual([]);
  });

  it('rejects a snapshot whose state was not captured', async () => {
    const { service } = withParent(usableRow({ env_universe_id: undefined, capture_status: 'partial' }));

    await expect(service.handle(fork())).resolves.toMatchObject({
      outcome: 'rejected',
      reason: 'snapshot_unusable',
      message: "snapshot 'snap-0002' of run 'parent' cannot be forked: its state was not captured (partial)",
    });
  });

  it('rejects a snapshot whose event carried no state', async () => {
    const { service } = withParent(usableRow(), null);

    await expect(service.handle(fork())).resolves.toMatchObject({ outcome: 'rejected', reason: 'snapshot_unusable' });
  });

  it('rejects a child id that is already a run', async () => {
    const { service, ledger } = withParent();
    ledger.accept('acme', 'earlier', 'agent.start', 'child');

    await expect(service.handle(fork())).resolves.toMatchObject({ outcome: 'rejected', reason: 'run_exists', message: "org acme already has a run 'child'" });
  });

  it('answers the same fork again with duplicate and starts one child', async () => {
    const { service, runs } = withParent();
    const command = fork();
    await service.handle(command);

    await expect(service.handle(command)).resolves.toMatchObject({ outcome: 'duplicate' });
    expect(runs.started()).toHaveLength(1);
  });

  it('releases its claim when the run directory is out of reach', async () => {
    const { service, runs, ledger } = withParent();
    runs.failNext('start', new TransientCommandError('temporal unavailable'));
    const command = fork();

    await expect(service.handle(command)).rejects.toBeInstanceOf(TransientCommandError);
    expect(ledger.released).toEqual([`acme/${command.command_id}`]);
  });
});
