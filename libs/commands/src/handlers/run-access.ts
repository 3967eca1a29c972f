import { isTerminal, type Command, type RunKind } from '@agentrun/contracts';
import { accepted, rejected, type CommandDecision } from '../decision';
import { RunNotFoundError, UpdateRefusedError } from '../errors';
import type { RunDirectoryPort, RunSignal, RunUpdate, RunView } from '../ports';

type Target = Pick<Command, 'org' | 'run_id'>;

/** The command's run in its org, if it is a run of this kind; otherwise the rejection. */
export async function findRun(runs: RunDirectoryPort, command: Target, kind: RunKind): Promise<RunView | CommandDecision> {
  const run = await runs.describe(command.org, command.run_id);
  if (run === undefined) return rejected('unknown_run', `org ${command.org} has no run '${command.run_id}'`);
  if (run.kind !== kind) return rejected('wrong_kind', `run '${command.run_id}' is not an ${kind} run`);
  return run;
}

export function isDecision(found: RunView | CommandDecision): found is CommandDecision {
  return 'outcome' in found;
}

/** As `findRun`, and the run must still be open. */
async function findOpenRun(runs: RunDirectoryPort, command: Target, kind: RunKind): Promise<CommandDecision | undefined> {
  const run = await findRun(runs, command, kind);
  if (isDecision(run)) return run;
  // A run that reached a terminal status is closed even while it finishes publishing its last events.
  const shownTerminal = run.status !== undefined && isTerminal(run.status);
  if (run.execution !== 'running' || shownTerminal) {
    return rejected('run_closed', `run '${command.run_id}' has already ended (${shownTerminal ? run.status : run.execution})`);
  }
  return undefined;
}

function closed(command: Target): CommandDecision {
  return rejected('run_closed', `run '${command.run_id}' has already ended`);
}

/** Signals an open run of this kind; a run that closes between the look-up and the signal is closed. */
export async function signalRun(runs: RunDirectoryPort, command: Target, kind: RunKind, signal: RunSignal): Promise<CommandDecision> {
  const refused = await findOpenRun(runs, command, kind);
  if (refused) return refused;
  try {
    await runs.signal(command.org, command.run_id, signal);
  } catch (err) {
    if (err instanceof RunNotFoundError) return closed(command);
    throw err;
  }
  return accepted();
}

/** Sends an update to an open run of this kind: its validator's refusal becomes the rejection, never history. */
export async function updateRun(
  runs: RunDirectoryPort,
  command: Target,
  kind: RunKind,
  update: RunUpdate,
  refusal: (message: string) => CommandDecision,
): Promise<CommandDecision> {
  const refused = await findOpenRun(runs, command, kind);
  if (refused) return refused;
  try {
    return accepted(await runs.update(command.org, command.run_id, update));
  } catch (err) {
    if (err instanceof UpdateRefusedError) return refusal(err.message);
    if (err instanceof RunNotFoundError) return closed(command);
    throw err;
  }
}
