import type { Command } from '@agentrun/contracts';
import { TransientCommandError } from '../errors';
import type { RunUpdate } from '../ports';
import { commandOf, serviceWithFakes } from '../testing/service-with-fakes';

interface UpdateCase {
  type: Command['type'];
  kind: 'agent' | 'eval';
  otherKind: 'agent' | 'eval';
  build: () => Command;
  update: (commandId: string) => RunUpdate;
}

const cases: UpdateCase[] = [
  {
    type: 'agent.change_goal',
    kind: 'agent',
    otherKind: 'eval',
    build: () => commandOf('agent.change_goal', { goal: 'write the docs' }),
    update: (id) => ({ name: 'change_goal', command_id: id, goal: 'write the docs' }),
  },
  {
    type: 'eval.approve',
    kind: 'eval',
    otherKind: 'agent',
    build: () => commandOf('eval.approve', { reviewer: 'alice' }),
    update: (id) => ({ name: 'approve', command_id: id, reviewer: 'alice' }),
  },
];

describe.each(cases)('$type', ({ kind, otherKind, build, update }) => {
  it("sends the update and accepts with the run's answer", async () => {
    const { service, runs } = serviceWithFakes();
    runs.add('acme', 'run-1', { kind, status: 'running' });
    const command = build();

    await expect(service.handle(command)).resolves.toMatchObject({ outcome: 'accepted', message: `${update('').name} applied` });

    expect(runs.sent()).toEqual([update(command.command_id)]);
  });

  it("rejects with validator_rejected when the run's validator refuses", async () => {
    const { service, runs } = serviceWithFakes();
    runs.add('acme', 'run-1', { kind, status: 'running' });
    runs.refuseUpdates = 'the run is not in a state that allows this';

    await expect(service.handle(build())).resolves.toMatchObject({
      outcome: 'rejected',
      reason: 'validator_rejected',
      message: 'the run is not in a state that allows this',
    });
  });

  it('rejects a run the org does not have', async () => {
    const { service } = serviceWithFakes();

    await expect(service.handle(build())).resolves.toMatchObject({ outcome: 'rejected', reason: 'unknown_run' });
  });

  it('rejects a run of the other kind', async () => {
    const { service, runs } = serviceWithFakes();
    runs.add('acme', 'run-1', { kind: otherKind });

    await expect(service.handle(build())).resolves.toMatchObject({ outcome: 'rejected', reason: 'wrong_kind' });
    expect(runs.sent()).toEqual([]);
  });

  it('rejects a closed run', async () => {
    const { service, runs } = serviceWithFakes();
    runs.add('acme', 'run-1', { kind, execution: 'completed', status: kind === 'agent' ? 'completed' : 'published' });

    await expect(service.handle(build())).resolves.toMatchObject({ outcome: 'rejected', reason: 'run_closed' });
    expect(runs.sent()).toEqual([]);
  });

  it('rejects a run that closed before the update arrived', async () => {
    const { service, runs } = serviceWithFakes();
    runs.add('acme', 'run-1', { kind, status: 'running' });
    runs.closesBeforeDelivery = true;

    await expect(service.handle(build())).resolves.toMatchObject({ outcome: 'rejected', reason: 'run_closed', message: "run 'run-1' has already ended" });
  });

  it('releases its claim when the run directory is out of reach', async () => {
    const { service, ledger, runs } = serviceWithFakes();
    runs.add('acme', 'run-1', { kind, status: 'running' });
    runs.failNext('update', new TransientCommandError('temporal unavailable'));
    const command = build();

    await expect(service.handle(command)).rejects.toBeInstanceOf(TransientCommandError);
    expect(ledger.released).toEqual([`acme/${command.command_id}`]);
  });

});

describe('eval.approve by a stranger', () => {
  it('rejects a reviewer the run does not know with not_a_reviewer', async () => {
    const { service, runs } = serviceWithFakes();
    runs.add('acme', 'run-1', { kind: 'eval', status: 'awaiting_review' });
    runs.refuseUpdates = "not_a_reviewer: 'mallory' is not a reviewer of this run";

    await expect(service.handle(commandOf('eval.approve', { reviewer: 'mallory' }))).resolves.toMatchObject({
      outcome: 'rejected',
      reason: 'not_a_reviewer',
      message: "'mallory' is not a reviewer of this run",
    });
  });
});
