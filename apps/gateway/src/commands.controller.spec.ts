import type { CommandService } from '@agentrun/commands';
import type { CommandEnvelope, CommandOutcome } from '@agentrun/contracts';
import type { ReadModel } from '@agentrun/persistence';
import { CommandsController } from './commands.controller';
import { ProblemException } from './problem';

/** The controller over a command service that answers every command it is handed as a duplicate (a retried key). */
function controller(): { commands: CommandsController; handled: CommandEnvelope[] } {
  const handled: CommandEnvelope[] = [];
  const service = {
    handle: async (command: CommandEnvelope): Promise<CommandOutcome> => {
      handled.push(command);
      return { command_id: command.command_id, org: command.org, run_id: command.run_id, type: command.type, outcome: 'duplicate', message: 'already accepted' } as CommandOutcome;
    },
  } as unknown as CommandService;
  return { commands: new CommandsController(service, {} as ReadModel), handled };
}

async function answer(promise: Promise<unknown>): Promise<unknown> {
  try {
    return await promise;
  } catch (err) {
    if (err instanceof ProblemException) return { status: err.getStatus(), body: err.getResponse() };
    throw err;
  }
}

describe('POST /evals', () => {
  const eval_ = { model: 'm', suite: 's', cases: 2 };

  it('refuses a start without reviewers (absent or empty) before the ledger, so a retried key is no duplicate of a refused body', async () => {
    for (const body of [eval_, { ...eval_, reviewers: [] }]) {
      const { commands, handled } = controller();
      expect(await answer(commands.startEval('acme', 'key-1', body))).toEqual({
        status: 400,
        body: expect.objectContaining({ reason: 'invalid_payload', detail: expect.stringMatching(/^an eval needs at least one reviewer/) }),
      });
      expect(handled).toEqual([]);
    }
  });

  it('hands a start with reviewers to the command service, and a body the payload schema refuses is still its own 400', async () => {
    const { commands, handled } = controller();
    expect(await answer(commands.startEval('acme', 'key-1', { ...eval_, reviewers: ['alice'] }))).toMatchObject({ command_id: 'key-1', outcome: 'duplicate' });
    expect(handled).toHaveLength(1);
    expect(await answer(commands.startEval('acme', 'key-2', { ...eval_, reviewers: [7] }))).toMatchObject({ status: 400, body: { title: 'invalid request body' } });
    expect(handled).toHaveLength(1);
  });
});
