import type { Command } from '@agentrun/contracts';
import { TransientCommandError } from '../errors';
import type { RunSignal } from '../ports';
import { commandOf, serviceWithFakes } from '../testing/service-with-fakes';

interface SignalCase {
  type: Command['type'];
  kind: 'agent' | 'eval';
  otherKind: 'agent' | 'eval';
  build: () => Command;
  signal: (commandId: string) => RunSignal;
}

const cases: SignalCase[] = [
  { type: 'agent.pause', kind: 'agent', otherKind: 'eval', build: () => commandOf('agent.pause', {}), signal: (id) => ({ name: 'pause', command_id: id }) },
  { type: 'agent.resume', kind: 'agent', otherKind: 'eval', build: () => commandOf('agent.resume', {}), signal: (id) => ({ name: 'resume', command_id: id }) },
  { type: 'agent.cancel', kind: 'agent', otherKind: 'eval', build: () => commandOf('agent.cancel', {}), signal: (id) => ({ name: 'cancel_run', command_id: id }) },
  {
    type: 'agent.inject_context',
    kind: 'agent',
    otherKind: 'eval',
    build: () => commandOf('agent.inject_context', { text: 'the tests live in spec/' }),
    signal: (id) => ({ name: 'inject_context', command_id: id, text: 'the tests live in spec/' }),
  },
  { type: 'eval.cancel', kind: 'eval', otherKind: 'agent', build: () => commandOf('eval.cancel', {}), signal: (id) => ({ name: 'cancel_eval', command_id: id }) },
];

describe.each(cases)('$type', ({ kind, otherKind, build, signal }) => {
  it('signals the open run and accepts', async () => {
    const { service, runs } = serviceWithFakes();
    runs.add('acme', 'run-1', { kind, status: 'running' });
    const command = build();

    await expect(service.handle(command)).resolves.toMatchObject({ outcome: 'accepted' });

    expect(runs.sent()).toEqual([signal(command.command_id)]);
  });

  it('rejects a run the org does not have', async () => {
    const { service, runs } = serviceWithFakes();
    runs.add('other-org', 'run-1', { kind });

    await expect(service.handle(build())).resolves.toMatchObject({ outcome: 'rejected', reason: 'unknown_run', message: "org acme has no run 'run-1'" });
    expect(runs.sent()).toEqual([]);
  });

  it('rejects a run of the other kind', async () => {
    const { service, runs } = serviceWithFakes();
    runs.add('acme', 'run-1', { kind: otherKind });

    await expect(service.handle(build())).resolves.toMatchObject({ outcome: 'rejected', reason: 'wrong_kind', message: `run 'run-1' is not an ${kind} run` });
    expect(runs.sent()).toEqual([]);
  });

  it('rejects a run whose workflow has closed', async () => {
    const { service, runs } = serviceWithFakes();
    runs.add('acme', 'run-1', { kind, execution: 'terminated' });

    await expect(service.handle(build())).resolves.toMatchObject({ outcome: 'rejected', reason: 'run_closed', message: "run 'run-1' has already ended (terminated)" });
  });

  it('rejects a run that reached a terminal status while its workflow still finishes', async () => {
    const { service, runs } = serviceWithFakes();
    runs.add('acme', 'run-1', { kind, status: 'cancelled' });

    await expect(service.handle(build())).resolves.toMatchObject({ outcome: 'rejected', reason: 'run_closed', message: "run 'run-1' has already ended (cancelled)" });
    expect(runs.sent()).toEqual([]);
  });

  it('rejects a run that closed between the look-up and the signal', async () => {
    const { service, runs } = serviceWithFakes();
    runs.add('acme', 'run-1', { kind, status: 'running' });
    runs.closesBeforeDelivery = true;

    await expect(service.handle(build())).resolves.toMatchObject({ outcome: 'rejected', reason: 'run_closed', message: "run 'run-1' has already ended" });
  });

  it('decides nothing and releases its claim when the signal cannot be delivered', async () => {
    const { service, ledger, runs, outcomes } = serviceWithFakes();
    runs.add('acme', 'run-1', { kind, status: 'running' });
    runs.failNext('signal', new TransientCommandError('temporal unavailable: 4 DEADLINE_EXCEEDED'));
    const command = build();

    await expect(service.handle(command)).rejects.toBeInstanceOf(TransientCommandError);

    expect(ledger.released).toEqual([`acme/${command.command_id}`]);
    expect(outcomes.published).toEqual([]);
    await expect(service.handle(command)).resolves.toMatchObject({ outcome: 'accepted' });
  });

  it('answers a repeated command with duplicate and signals once', async () => {
    const { service, runs } = serviceWithFakes();
    runs.add('acme', 'run-1', { kind, status: 'running' });
    const command = build();
    await service.handle(command);

    await expect(service.handle(command)).resolves.toMatchObject({ outcome: 'duplicate' });
    expect(runs.sent()).toHaveLength(1);
  });
});
