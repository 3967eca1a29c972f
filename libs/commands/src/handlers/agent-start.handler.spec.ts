import { TransientCommandError } from '../errors';
import { commandOf, serviceWithFakes, TEST_AGENT_DEFAULTS } from '../testing/service-with-fakes';

describe('agent.start', () => {
  it('starts an AgentRun on the prefixed agent lane with the platform defaults', async () => {
    const { service, runs } = serviceWithFakes('t1-');
    const command = commandOf('agent.start', { goal: 'tidy the repo', owner: 'dana', snapshots: { per_turn: true } });

    await expect(service.handle(command)).resolves.toMatchObject({ outcome: 'accepted' });

    const [request] = runs.started();
    expect(request).toMatchObject({ org: 'acme', runId: 'run-1', commandId: command.command_id, taskQueue: 't1-agent-workflows' });
    expect(request?.workflow).toEqual({
      kind: 'agent',
      input: {
        org: 'acme',
        run_id: 'run-1',
        goal: 'tidy the repo',
        max_steps: 8,
        policy: 'scripted',
        tier: 'batch',
        owner: 'dana',
        lanes: { agentWorkflows: 't1-agent-workflows', cpuTools: 't1-cpu-tools', gpuTools: 't1-gpu-tools', snapshots: 't1-snapshots' },
        snapshots: { interval_seconds: 0, per_turn: true, at_end: true, timeout_seconds: 300, max_snapshots: 24 },
        ...TEST_AGENT_DEFAULTS,
      },
    });
    expect(request?.memo).toEqual({ tier: 'batch', max_steps: 8 });
    expect(request?.attributes).toEqual({ current_step: 0, owner: 'dana' });
  });

  it('keeps the settings the command gives', async () => {
    const { service, runs } = serviceWithFakes();

    await service.handle(commandOf('agent.start', { goal: 'g', max_steps: 3, policy: 'llm', tier: 'enterprise' }));

    const input = runs.started()[0]?.workflow.input;
    expect(input).toMatchObject({ max_steps: 3, policy: 'llm', tier: 'enterprise' });
    expect(input).not.toHaveProperty('snapshots');
    expect(input).not.toHaveProperty('owner');
  });

  it('rejects a second run with the same id, as the ledger remembers it', async () => {
    const { service, ledger, runs } = serviceWithFakes();
    ledger.accept('acme', 'earlier', 'agent.start', 'run-1');

    const outcome = await service.handle(commandOf('agent.start', { goal: 'g' }));

    expect(outcome).toMatchObject({ outcome: 'rejected', reason: 'run_exists', message: "org acme already has a run 'run-1'" });
    expect(runs.started()).toEqual([]);
  });

  it('rejects a second run with the same id that only the run directory knows', async () => {
    const { service, runs } = serviceWithFakes();
    runs.add('acme', 'run-1', { kind: 'agent', startCommandId: 'someone-else' });

    await expect(service.handle(commandOf('agent.start', { goal: 'g' }))).resolves.toMatchObject({ outcome: 'rejected', reason: 'run_exists' });
  });

  it('accepts a run its own earlier attempt started before the decision was recorded', async () => {
    const { service, runs } = serviceWithFakes();
    const command = commandOf('agent.start', { goal: 'g' });
    runs.add('acme', 'run-1', { kind: 'agent', startCommandId: command.command_id });

    await expect(service.handle(command)).resolves.toMatchObject({ outcome: 'accepted' });
  });

  it('allows the same run id in another org', async () => {
    const { service, ledger } = serviceWithFakes();
    ledger.accept('other-org', 'earlier', 'agent.start', 'run-1');

    await expect(service.handle(commandOf('agent.start', { goal: 'g' }))).resolves.toMatchObject({ outcome: 'accepted' });
  });

  it('decides nothing and releases its claim when the run directory is out of reach', async () => {
    const { service, ledger, runs, outcomes } = serviceWithFakes();
    const command = commandOf('agent.start', { goal: 'g' });
    runs.failNext('start', new TransientCommandError('temporal unavailable: 14 UNAVAILABLE'));

    await expect(service.handle(command)).rejects.toThrow('temporal unavailable');

    expect(ledger.released).toEqual([`acme/${command.command_id}`]);
    expect(ledger.entries.get(`acme/${command.command_id}`)?.decided).toBeUndefined();
    expect(outcomes.published).toEqual([]);
  });
});
