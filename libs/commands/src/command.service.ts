import { status as grpcStatus } from '@grpc/grpc-js';
import { WorkflowNotFoundError, type Client, type WorkflowHandle } from '@temporalio/client';
import { defineSearchAttributeKey, WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import {
  DEFAULT_MAX_STEPS,
  isTerminal,
  workflowIdFor,
  type Command,
  type CommandOf,
  type CommandOutcome,
  type RejectionReason,
} from '@agentrun/contracts';
import type { CommandLedger } from '@agentrun/persistence';
import {
  AgentRun,
  cancelRunSignal,
  changeGoalUpdate,
  injectContextSignal,
  pauseSignal,
  resumeSignal,
  type AgentRunInput,
  type ToolTimeouts,
} from '@agentrun/workflows';
import { lanesFor } from './lanes';

/** Temporal could not be reached or was busy: nothing was decided, so the caller retries later. */
export class TransientCommandError extends Error {
  override readonly name = 'TransientCommandError';
}

/** How every AgentRun is started: its history budget and research cadence. */
export interface AgentDefaults {
  steps_per_execution: number;
  history_budget: { events: number; bytes: number };
  research_every: number;
  timeouts: ToolTimeouts;
}

export interface CommandServiceDeps {
  temporal: Client;
  ledger: CommandLedger;
  taskQueuePrefix: string;
  agentDefaults: AgentDefaults;
  /** Publishes the outcome record; awaited before the service answers. */
  publishOutcome(outcome: CommandOutcome): Promise<void>;
  now?: () => Date;
}

type CommandRef = { command_id: string; org: string; run_id: string; type: string };
type Decision = { outcome: 'accepted'; message?: string } | { outcome: 'rejected'; reason: RejectionReason; message: string };

const WORKFLOW_TYPE_OF_KIND = { agent: 'AgentRun', eval: 'EvalRun' } as const;
const TRANSIENT_GRPC = new Set<number>([grpcStatus.UNAVAILABLE, grpcStatus.DEADLINE_EXCEEDED, grpcStatus.RESOURCE_EXHAUSTED, grpcStatus.ABORTED, grpcStatus.UNKNOWN]);

function isTransient(err: unknown): boolean {
  const code = (err as { code?: unknown } | undefined)?.code ?? (err as { cause?: { code?: unknown } } | undefined)?.cause?.code;
  if (typeof code === 'number') return TRANSIENT_GRPC.has(code);
  const message = err instanceof Error ? err.message : String(err);
  return /ECONNREFUSED|ECONNRESET|UNAVAILABLE|DEADLINE_EXCEEDED|connection|transport|timed? ?out/i.test(message);
}

const START_COMMAND_MEMO = 'start_command_id';
const AGENT_STATUS_KEY = defineSearchAttributeKey('AgentStatus', 'KEYWORD');

/**
 * The command library: the one path from a command (Kafka or HTTP) to Temporal. Each command id
 * gets one decision per org, recorded in the ledger, and one outcome record.
 */
export class CommandService {
  private readonly lanes;
  private readonly now: () => Date;

  constructor(private readonly deps: CommandServiceDeps) {
    this.lanes = lanesFor(deps.taskQueuePrefix);
    this.now = deps.now ?? (() => new Date());
  }

  /**
   * Decides a valid command. `source` names the Kafka message it came from (topic/partition/offset),
   * so a redelivery of that same message re-sends the first outcome. Throws `TransientCommandError`
   * when Temporal is out of reach or another handler is deciding the same command right now.
   */
  async handle(command: Command, source: string | null = null): Promise<CommandOutcome> {
    return this.decideOnce(command, source, async () => {
      try {
        return await this.decide(command);
      } catch (err) {
        if (isTransient(err)) throw new TransientCommandError(`temporal unavailable: ${(err as Error).message}`);
        return { outcome: 'rejected', reason: 'internal_error', message: (err as Error).message };
      }
    });
  }

  /** Records and publishes the outcome of a command that failed validation before reaching Temporal. */
  async reject(base: CommandRef, reason: RejectionReason, message: string, source: string | null = null): Promise<CommandOutcome> {
    return this.decideOnce(base, source, async () => ({ outcome: 'rejected', reason, message }));
  }

  private async decideOnce(command: CommandRef, source: string | null, decide: () => Promise<Decision>): Promise<CommandOutcome> {
    const claim = await this.deps.ledger.claim(command.org, command.command_id, command.type, command.run_id, source);
    if (claim.state === 'busy') throw new TransientCommandError(`command ${command.command_id} is being decided by another handler`);
    if (claim.state === 'decided') {
      const { decided } = claim;
      const first: CommandOutcome = {
        ...this.outcome(command, decided.outcome === 'rejected'
          ? { outcome: 'rejected', reason: (decided.reason ?? 'internal_error') as RejectionReason, message: decided.message ?? '' }
          : { outcome: 'accepted', ...(decided.message ? { message: decided.message } : {}) }),
        outcome: decided.outcome,
        ts: new Date(decided.decided_at).toISOString(),
      };
      // The same message read again (its offset was not committed): its one outcome, once more.
      const outcome: CommandOutcome =
        source !== null && decided.source === source
          ? first
          : { ...this.outcome(command, { outcome: 'accepted' }), outcome: 'duplicate', message: `command ${command.command_id} was already ${decided.outcome}${decided.reason ? ` (${decided.reason})` : ''}` };
      await this.deps.publishOutcome(outcome);
      return outcome;
    }
    const outcome = this.outcome(command, await decide());
    await this.deps.ledger.decide(outcome);
    await this.deps.publishOutcome(outcome);
    return outcome;
  }

  private outcome(command: CommandRef, decision: Decision): CommandOutcome {
    return {
      command_id: command.command_id,
      org: command.org,
      run_id: command.run_id,
      type: command.type,
      outcome: decision.outcome,
      ...(decision.outcome === 'rejected' ? { reason: decision.reason } : {}),
      ...(decision.message ? { message: decision.message } : {}),
      ts: this.now().toISOString(),
    };
  }

  private async decide(command: Command): Promise<Decision> {
    switch (command.type) {
      case 'agent.start':
        return this.startAgent(command);
      case 'agent.pause':
        return this.signal(command, 'agent', (h) => h.signal(pauseSignal, { command_id: command.command_id }));
      case 'agent.resume':
        return this.signal(command, 'agent', (h) => h.signal(resumeSignal, { command_id: command.command_id }));
      case 'agent.cancel':
        return this.signal(command, 'agent', (h) => h.signal(cancelRunSignal, { command_id: command.command_id }));
      case 'agent.inject_context':
        return this.signal(command, 'agent', (h) =>
          h.signal(injectContextSignal, { command_id: command.command_id, text: command.payload.text }),
        );
      case 'agent.change_goal':
        return this.changeGoal(command);
      case 'agent.fork':
      case 'eval.start':
      case 'eval.cancel':
      case 'eval.retry_failed':
      case 'eval.approve':
        return { outcome: 'rejected', reason: 'not_supported', message: `'${command.type}' is not available in this release` };
      default: {
        const unknown: never = command;
        return { outcome: 'rejected', reason: 'invalid_payload', message: `unhandled command ${JSON.stringify(unknown)}` };
      }
    }
  }

  private async startAgent(command: CommandOf<'agent.start'>): Promise<Decision> {
    const { org, run_id, payload } = command;
    const workflowId = workflowIdFor(org, run_id);
    // Temporal forgets a closed run after its retention; the ledger does not.
    const startedBy = await this.deps.ledger.acceptedStart(org, run_id);
    if (startedBy !== undefined && startedBy !== command.command_id) {
      return { outcome: 'rejected', reason: 'run_exists', message: `org ${org} already has a run '${run_id}'` };
    }
    const input: AgentRunInput = {
      org,
      run_id,
      goal: payload.goal,
      max_steps: payload.max_steps ?? DEFAULT_MAX_STEPS,
      policy: payload.policy ?? 'scripted',
      tier: payload.tier ?? 'batch',
      ...(payload.owner ? { owner: payload.owner } : {}),
      lanes: { agentWorkflows: this.lanes.agentWorkflows, cpuTools: this.lanes.cpuTools, gpuTools: this.lanes.gpuTools },
      ...this.deps.agentDefaults,
    };
    try {
      await this.deps.temporal.workflow.start(AgentRun, {
        workflowId,
        taskQueue: this.lanes.agentWorkflows,
        args: [input],
        // A replayed start after the run closed starts nothing.
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
        workflowIdConflictPolicy: 'FAIL',
        memo: { tier: input.tier, max_steps: input.max_steps, [START_COMMAND_MEMO]: command.command_id },
        typedSearchAttributes: [
          { key: defineSearchAttributeKey('Org', 'KEYWORD'), value: org },
          { key: defineSearchAttributeKey('RunKind', 'KEYWORD'), value: 'agent' },
          { key: defineSearchAttributeKey('AgentStatus', 'KEYWORD'), value: 'queued' },
          { key: defineSearchAttributeKey('CurrentStep', 'INT'), value: 0 },
          ...(input.owner ? [{ key: defineSearchAttributeKey('Owner', 'KEYWORD'), value: input.owner }] : []),
        ],
      });
      return { outcome: 'accepted' };
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
      // Our own earlier attempt may have started it before a crash kept the ledger from saying so.
      const description = await this.deps.temporal.workflow.getHandle(workflowId).describe();
      const memo = description.memo as Record<string, unknown> | undefined;
      if (memo?.[START_COMMAND_MEMO] === command.command_id) return { outcome: 'accepted' };
      return { outcome: 'rejected', reason: 'run_exists', message: `org ${org} already has a run '${run_id}'` };
    }
  }

  /** Looks the run up in its org and checks its kind and that it is still open. */
  private async target(command: Command, kind: 'agent' | 'eval'): Promise<{ handle: WorkflowHandle } | Decision> {
    const handle = this.deps.temporal.workflow.getHandle(workflowIdFor(command.org, command.run_id));
    let description;
    try {
      description = await handle.describe();
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return this.unknownRun(command);
      throw err;
    }
    if (description.type !== WORKFLOW_TYPE_OF_KIND[kind]) {
      return { outcome: 'rejected', reason: 'wrong_kind', message: `run '${command.run_id}' is not an ${kind} run` };
    }
    // A run that reached a terminal status is closed even while it finishes publishing its last events.
    const shown = description.typedSearchAttributes.get(AGENT_STATUS_KEY);
    if (description.status.name !== 'RUNNING' || (shown !== undefined && isTerminal(shown))) {
      const ended = shown !== undefined && isTerminal(shown) ? shown : description.status.name.toLowerCase();
      return { outcome: 'rejected', reason: 'run_closed', message: `run '${command.run_id}' has already ended (${ended})` };
    }
    return { handle };
  }

  private unknownRun(command: Command): Decision {
    return { outcome: 'rejected', reason: 'unknown_run', message: `org ${command.org} has no run '${command.run_id}'` };
  }

  private async signal(command: Command, kind: 'agent' | 'eval', send: (handle: WorkflowHandle) => Promise<void>): Promise<Decision> {
    const target = await this.target(command, kind);
    if (!('handle' in target)) return target;
    try {
      await send(target.handle);
    } catch (err) {
      // It closed between the look-up and the signal.
      if (err instanceof WorkflowNotFoundError) return { outcome: 'rejected', reason: 'run_closed', message: `run '${command.run_id}' has already ended` };
      throw err;
    }
    return { outcome: 'accepted' };
  }

  private async changeGoal(command: CommandOf<'agent.change_goal'>): Promise<Decision> {
    const target = await this.target(command, 'agent');
    if (!('handle' in target)) return target;
    try {
      const result = await target.handle.executeUpdate(changeGoalUpdate, {
        args: [{ command_id: command.command_id, goal: command.payload.goal }],
        updateId: command.command_id,
      });
      return { outcome: 'accepted', message: result };
    } catch (err) {
      const name = (err as Error).name;
      if (name === 'WorkflowUpdateFailedError') {
        const cause = (err as { cause?: Error }).cause;
        return { outcome: 'rejected', reason: 'validator_rejected', message: cause?.message ?? (err as Error).message };
      }
      if (err instanceof WorkflowNotFoundError) return { outcome: 'rejected', reason: 'run_closed', message: `run '${command.run_id}' has already ended` };
      throw err;
    }
  }
}
