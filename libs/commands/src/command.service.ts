import { Logger } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { COMMAND_KEY_ID_HEADER, COMMAND_SIGNATURE_HEADER, lanesFor, type Command, type CommandOf, type CommandOutcome, type CommandType, type RejectionReason } from '@agentrun/contracts';
import { rejected, type CommandDecision } from './decision';
import { looksUnreachable, TransientCommandError } from './errors';
import type { CommandHandlers } from './handlers/command-handler';
import { createCommandHandlers } from './handlers/registry';
import type { AgentDefaults, EvalDefaults } from './handlers/run-starter';
import type { CommandLedgerPort, DatasetCatalogPort, OrgBudgetPort, OutcomePublisherPort, QuotaPort, RunDirectoryPort, SnapshotLookupPort } from './ports';

export interface CommandServiceDeps {
  runs: RunDirectoryPort;
  ledger: CommandLedgerPort;
  /** The snapshot manifest forks start from. */
  snapshots: SnapshotLookupPort;
  /** Awaited before the service answers. */
  outcomes: OutcomePublisherPort;
  taskQueuePrefix: string;
  agentDefaults: AgentDefaults;
  evalDefaults: EvalDefaults;
  /** Real evals' datasets and model endpoints; without it an eval with a dataset is refused. */
  datasets?: DatasetCatalogPort;
  /** Per-org limits checked at every start; without it, none. */
  quotas?: QuotaPort;
  /** Orgs' monthly budgets, checked before a run's budget is raised. */
  budgets?: OrgBudgetPort;
  /** The runs started here put their CPU tools on the workflow's own task queue (whose worker serves them too, eagerly). */
  cpuToolsOnWorkflowQueue?: boolean;
  now?: () => Date;
}

type CommandRef = { command_id: string; org: string; run_id: string; type: string };

/**
 * The whole answer to a command whose credential did not count: it names no run state, so it reads the
 * same for a run that exists and one that does not.
 */
export const UNAUTHORIZED_MESSAGE = `the command carries no valid command key signature (${COMMAND_KEY_ID_HEADER}, ${COMMAND_SIGNATURE_HEADER} headers); it was not looked at`;

const INTERNAL_ERROR_MESSAGE = 'the command failed with an unexpected error, logged under error id ';

/** The ledger keeps an outcome's message, not its error id: a replayed internal_error reads it back from there. */
function errorIdOf(message: string | null): { error_id?: string } {
  return message?.startsWith(INTERNAL_ERROR_MESSAGE) ? { error_id: message.slice(INTERNAL_ERROR_MESSAGE.length) } : {};
}

/**
 * The one path from a command (Kafka or HTTP) to its run. Each command id gets one decision per org,
 * recorded in the ledger, and one outcome record; deciding is left to the handler of its type.
 */
export class CommandService {
  private readonly handlers: CommandHandlers;
  private readonly now: () => Date;
  private readonly logger = new Logger('commands');

  constructor(private readonly deps: CommandServiceDeps) {
    const lanes = lanesFor(deps.taskQueuePrefix);
    this.handlers = createCommandHandlers({ ...deps, lanes: deps.cpuToolsOnWorkflowQueue ? { ...lanes, cpuTools: lanes.agentWorkflows } : lanes });
    this.now = deps.now ?? (() => new Date());
  }

  /**
   * Decides a valid command. `source` names the Kafka message it came from (topic/partition/offset),
   * so a redelivery of that same message re-sends the first outcome. Throws `TransientCommandError`
   * when a dependency is out of reach or another handler is deciding the same command right now.
   */
  async handle(command: Command, source: string | null = null): Promise<CommandOutcome> {
    return this.decideOnce(command, source, async () => {
      try {
        return await this.dispatch(command);
      } catch (err) {
        if (err instanceof TransientCommandError) throw err;
        if (looksUnreachable(err)) throw new TransientCommandError(`not decided: ${(err as Error).message}`);
        return this.internalError(command, err);
      }
    });
  }

  /**
   * A handler failed in a way nobody planned for. Its error (Temporal's or a driver's text, which may
   * name servers, paths and queries) goes to the log under a new id; the outcome, which reaches the
   * client over HTTP and every consumer of the outcome topic, carries the id and a generic message.
   */
  private internalError(command: CommandRef, err: unknown): CommandDecision {
    const errorId = randomUUID();
    this.logger.error(`command ${command.command_id} (${command.type} on ${command.org}/${command.run_id}) failed, error id ${errorId}: ${(err as Error)?.stack ?? String(err)}`);
    return { outcome: 'rejected', reason: 'internal_error', message: INTERNAL_ERROR_MESSAGE + errorId, error_id: errorId };
  }

  /** Records and publishes the outcome of a command that failed validation before reaching its handler. */
  async reject(base: CommandRef, reason: RejectionReason, message: string, source: string | null = null): Promise<CommandOutcome> {
    return this.decideOnce(base, source, async () => rejected(reason, message));
  }

  /**
   * Answers a command whose org credential did not verify: `rejected / unauthorized`, published but
   * not recorded. The ledger is left alone on purpose: a claim would let anyone burn another org's
   * command ids (the signed command sent later would be a `duplicate`), and reading it would tell an
   * unauthenticated sender whether an id was used. A redelivery answers the same way again.
   */
  async refuseUnauthorized(base: CommandRef): Promise<CommandOutcome> {
    const outcome = this.outcome(base, rejected('unauthorized', UNAUTHORIZED_MESSAGE));
    await this.deps.outcomes.publish(outcome);
    return outcome;
  }

  private dispatch<T extends CommandType>(command: CommandOf<T>): Promise<CommandDecision> {
    return this.handlers[command.type](command);
  }

  private async decideOnce(command: CommandRef, source: string | null, decide: () => Promise<CommandDecision>): Promise<CommandOutcome> {
    const { ledger, outcomes } = this.deps;
    const claim = await ledger.claim(command.org, command.command_id, command.type, command.run_id, source);
    if (claim.state === 'busy') throw new TransientCommandError(`command ${command.command_id} is being decided by another handler`);
    if (claim.state === 'decided') {
      const { decided } = claim;
      // The same message read again (its offset was not committed): its one outcome, once more.
      const outcome: CommandOutcome =
        source !== null && decided.source === source
          ? {
              ...this.outcome(
                command,
                decided.outcome === 'rejected'
                  ? { ...rejected((decided.reason ?? 'internal_error') as RejectionReason, decided.message ?? ''), ...errorIdOf(decided.message) }
                  : { outcome: 'accepted', ...(decided.message ? { message: decided.message } : {}) },
              ),
              outcome: decided.outcome,
              ts: new Date(decided.decided_at).toISOString(),
            }
          : {
              ...this.outcome(command, { outcome: 'accepted' }),
              outcome: 'duplicate',
              message: `command ${command.command_id} was already ${decided.outcome}${decided.reason ? ` (${decided.reason})` : ''}`,
            };
      await outcomes.publish(outcome);
      return outcome;
    }
    let decision: CommandDecision;
    try {
      decision = await decide();
    } catch (err) {
      if (err instanceof TransientCommandError) await ledger.release(command.org, command.command_id);
      throw err;
    }
    const outcome = this.outcome(command, decision);
    await ledger.decide(outcome);
    await outcomes.publish(outcome);
    return outcome;
  }

  private outcome(command: CommandRef, decision: CommandDecision): CommandOutcome {
    return {
      command_id: command.command_id,
      org: command.org,
      run_id: command.run_id,
      type: command.type,
      outcome: decision.outcome,
      ...(decision.outcome === 'rejected' ? { reason: decision.reason } : {}),
      ...(decision.message ? { message: decision.message } : {}),
      ...(decision.outcome === 'rejected' && decision.error_id ? { error_id: decision.error_id } : {}),
      ts: this.now().toISOString(),
    };
  }
}
