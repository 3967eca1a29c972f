import { Logger } from '@nestjs/common';
import { COMMAND_TYPES } from '@agentrun/contracts';
import { TransientCommandError } from './errors';
import { createCommandHandlers } from './handlers/registry';
import { commandOf, serviceWithFakes, TEST_AGENT_DEFAULTS, TEST_EVAL_DEFAULTS, TEST_NOW } from './testing/service-with-fakes';

describe('CommandService', () => {
  it('has a handler for every command type', () => {
    const { runs, ledger, snapshots } = serviceWithFakes();
    const handlers = createCommandHandlers({ runs, ledger, snapshots, lanes: { agentWorkflows: 'a', cpuTools: 'c', gpuTools: 'g', gpuEval: 'e', snapshots: 's' }, agentDefaults: TEST_AGENT_DEFAULTS, evalDefaults: TEST_EVAL_DEFAULTS });
    expect(Object.keys(handlers).sort()).toEqual([...COMMAND_TYPES].sort());
    for (const type of COMMAND_TYPES) expect(typeof handlers[type]).toBe('function');
  });

  it('records an accepted decision in the ledger and publishes it once', async () => {
    const { service, ledger, outcomes } = serviceWithFakes();
    const command = commandOf('agent.start', { goal: 'tidy the repo' });

    const outcome = await service.handle(command);

    expect(outcome).toEqual({ command_id: command.command_id, org: 'acme', run_id: 'run-1', type: 'agent.start', outcome: 'accepted', ts: TEST_NOW.toISOString() });
    expect(outcomes.published).toEqual([outcome]);
    expect(ledger.entries.get(`acme/${command.command_id}`)?.decided?.outcome).toBe('accepted');
  });

  it('answers a command id seen before with duplicate and leaves the run alone', async () => {
    const { service, runs, outcomes } = serviceWithFakes();
    const command = commandOf('agent.start', { goal: 'tidy the repo' });
    await service.handle(command);

    const again = await service.handle(command);

    expect(again).toMatchObject({ outcome: 'duplicate', message: `command ${command.command_id} was already accepted` });
    expect(again.reason).toBeUndefined();
    expect(runs.started()).toHaveLength(1);
    expect(outcomes.published.map((o) => o.outcome)).toEqual(['accepted', 'duplicate']);
  });

  it('names the first rejection in a duplicate', async () => {
    const { service } = serviceWithFakes();
    const command = commandOf('agent.pause', {}, { run_id: 'nowhere' });
    await service.handle(command);

    const again = await service.handle(command);

    expect(again).toMatchObject({ outcome: 'duplicate', message: `command ${command.command_id} was already rejected (unknown_run)` });
  });

  it('re-sends the first outcome when the same Kafka message is read again', async () => {
    const { service, outcomes } = serviceWithFakes();
    const command = commandOf('agent.pause', {}, { run_id: 'nowhere' });
    const first = await service.handle(command, 'agentrun.commands.v1/0/17');

    const redelivered = await service.handle(command, 'agentrun.commands.v1/0/17');

    expect(redelivered).toEqual(first);
    expect(outcomes.published).toEqual([first, first]);
  });

  it('refuses to decide a command another handler holds, without publishing', async () => {
    const { service, ledger, runs, outcomes } = serviceWithFakes();
    const command = commandOf('agent.start', { goal: 'tidy the repo' });
    ledger.hold('acme', command.command_id, command.type, command.run_id);

    await expect(service.handle(command)).rejects.toBeInstanceOf(TransientCommandError);

    expect(runs.calls).toEqual([]);
    expect(outcomes.published).toEqual([]);
  });

  it('releases the claim when the run directory is out of reach, so a retry decides', async () => {
    const { service, ledger, runs, outcomes } = serviceWithFakes();
    const command = commandOf('agent.start', { goal: 'tidy the repo' });
    runs.failNext('start', new TransientCommandError('temporal unavailable: connect ECONNREFUSED'));

    await expect(service.handle(command)).rejects.toBeInstanceOf(TransientCommandError);
    expect(ledger.released).toEqual([`acme/${command.command_id}`]);
    expect(outcomes.published).toEqual([]);

    await expect(service.handle(command)).resolves.toMatchObject({ outcome: 'accepted' });
  });

  it('treats an error that reads as a lost connection as transient', async () => {
    const { service, ledger, runs } = serviceWithFakes();
    const command = commandOf('agent.pause', {});
    runs.failNext('describe', new Error('Connection terminated unexpectedly'));

    await expect(service.handle(command)).rejects.toBeInstanceOf(TransientCommandError);
    expect(ledger.released).toEqual([`acme/${command.command_id}`]);
  });

  it('rejects with internal_error when a handler fails for any other reason, and records it: the error under an id in the log, the id alone in the outcome', async () => {
    const logged = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    try {
      const { service, ledger, runs, outcomes } = serviceWithFakes();
      const command = commandOf('agent.pause', {});
      runs.failNext('describe', new Error('malformed memo in workflow acme/run-1 (namespace prod-7, frontend 10.4.5.6:7233)'));

      const outcome = await service.handle(command, 'agentrun.commands.v1/0/18');

      expect(outcome).toMatchObject({ outcome: 'rejected', reason: 'internal_error', error_id: expect.stringMatching(/^[0-9a-f-]{36}$/) });
      expect(outcome.message).toBe(`the command failed with an unexpected error, logged under error id ${outcome.error_id}`);
      expect(JSON.stringify(outcome)).not.toMatch(/memo|namespace|10\.4/);
      expect(logged).toHaveBeenCalledTimes(1);
      expect(logged.mock.calls[0][0]).toContain(`error id ${outcome.error_id}: Error: malformed memo in workflow acme/run-1 (namespace prod-7, frontend 10.4.5.6:7233)`);
      expect(ledger.released).toEqual([]);
      expect(outcomes.published).toEqual([outcome]);
      // The same Kafka message read again gets the same outcome, its error id included.
      expect(await service.handle(command, 'agentrun.commands.v1/0/18')).toEqual(outcome);
    } finally {
      logged.mockRestore();
    }
  });

  it('records and publishes a rejection decided before any handler', async () => {
    const { service, runs, outcomes } = serviceWithFakes();
    const base = { command_id: 'c-invalid', org: 'acme', run_id: 'run-1', type: 'agent.start' };

    const outcome = await service.reject(base, 'invalid_payload', 'goal: must not be empty', 'agentrun.commands.v1/2/5');

    expect(outcome).toMatchObject({ outcome: 'rejected', reason: 'invalid_payload', message: 'goal: must not be empty' });
    expect(runs.calls).toEqual([]);
    expect(outcomes.published).toEqual([outcome]);
    await expect(service.reject(base, 'invalid_payload', 'goal: must not be empty', 'agentrun.commands.v1/2/5')).resolves.toEqual(outcome);
  });
});
