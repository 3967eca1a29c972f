import { status as grpcStatus } from '@grpc/grpc-js';
import { WorkflowNotFoundError, type Client, type WorkflowExecutionDescription, type WorkflowHandle, type WorkflowStartOptions } from '@temporalio/client';
import { defineSearchAttributeKey, WorkflowExecutionAlreadyStartedError, type SearchAttributePair } from '@temporalio/common';
import {
  DEFAULT_MAX_STEPS,
  isTerminal,
  SNAPSHOT_DEFAULTS,
  type AgentStartPayload,
  type SnapshotSettings,
  RUN_ID_PATTERN,
  type EvalStartPayload,
  workflowIdFor,
  type Command,
  type CommandOf,
  type CommandOutcome,
  type RejectionReason,
} from '@agentrun/contracts';
import type { CommandLedger, SnapshotManifest } from '@agentrun/persistence';
import {
  AgentRun,
  approveUpdate,
  cancelEvalSignal,
  cancelRunSignal,
  EvalRun,
  evalStatusQuery,
  type EvalRunInput,
  changeGoalUpdate,
  injectContextSignal,
  pauseSignal,
  resumeSignal,
  type AgentRunInput,
  type ForkInput,
  type SnapshotSeriesConfig,
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

/** How every EvalRun is started. */
export interface EvalDefaults {
  parallelism: number;
  errored_ungraded: boolean;
  case_heartbeat_s: number;
}

export interface CommandServiceDeps {
  temporal: Client;
  ledger: CommandLedger;
  /** The snapshot manifest forks start from. */
  snapshots: SnapshotManifest;
  taskQueuePrefix: string;
  agentDefaults: AgentDefaults;
  evalDefaults: EvalDefaults;
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

/** A run's snapshot settings with the reference's defaults filled in. */
export function snapshotConfigOf(settings: SnapshotSettings): SnapshotSeriesConfig {
  return {
    interval_seconds: settings.interval_seconds ?? 0,
    per_turn: settings.per_turn ?? SNAPSHOT_DEFAULTS.per_turn,
    at_end: settings.at_end ?? SNAPSHOT_DEFAULTS.at_end,
    timeout_seconds: settings.timeout_seconds ?? SNAPSHOT_DEFAULTS.timeout_seconds,
    max_snapshots: settings.max_snapshots ?? SNAPSHOT_DEFAULTS.max_snapshots,
  };
}
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
    let decision: Decision;
    try {
      decision = await decide();
    } catch (err) {
      if (err instanceof TransientCommandError) await this.deps.ledger.release(command.org, command.command_id);
      throw err;
    }
    const outcome = this.outcome(command, decision);
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
      case 'eval.start':
        return this.startEval(command.command_id, command.org, command.run_id, command.payload);
      case 'eval.cancel':
        return this.signal(command, 'eval', (h) => h.signal(cancelEvalSignal, { command_id: command.command_id }));
      case 'eval.retry_failed':
        return this.retryFailed(command);
      case 'eval.approve':
        return this.approve(command);
      case 'agent.fork':
        return this.fork(command);
      default: {
        const unknown: never = command;
        return { outcome: 'rejected', reason: 'invalid_payload', message: `unhandled command ${JSON.stringify(unknown)}` };
      }
    }
  }

  private async startAgent(command: CommandOf<'agent.start'>): Promise<Decision> {
    return this.startAgentRun(command.command_id, command.org, command.run_id, command.payload);
  }

  /** Starts an AgentRun with the platform's defaults; a fork adds its parent, its snapshot and the step it starts at. */
  private async startAgentRun(commandId: string, org: string, runId: string, settings: AgentStartPayload, fork?: { input: ForkInput; step: number }): Promise<Decision> {
    const input: AgentRunInput = {
      org,
      run_id: runId,
      goal: settings.goal,
      max_steps: settings.max_steps ?? DEFAULT_MAX_STEPS,
      policy: settings.policy ?? 'scripted',
      tier: settings.tier ?? 'batch',
      ...(settings.owner ? { owner: settings.owner } : {}),
      ...(fork ? { parent_run_id: fork.input.from_run_id, fork: fork.input } : {}),
      lanes: this.agentLanes(),
      ...(settings.snapshots ? { snapshots: snapshotConfigOf(settings.snapshots) } : {}),
      ...this.deps.agentDefaults,
    };
    return this.startRun(commandId, org, runId, 'agent', (options) => this.deps.temporal.workflow.start(AgentRun, { ...options, args: [input] }), {
      memo: { tier: input.tier, max_steps: input.max_steps, ...(fork ? { parent_run_id: fork.input.from_run_id, forked_from_snapshot: fork.input.snapshot_id } : {}) },
      attributes: [
        { key: defineSearchAttributeKey('CurrentStep', 'INT'), value: fork?.step ?? 0 },
        ...(fork ? [{ key: defineSearchAttributeKey('RunParent', 'KEYWORD'), value: fork.input.from_run_id }] : []),
        ...(input.owner ? [{ key: defineSearchAttributeKey('Owner', 'KEYWORD'), value: input.owner }] : []),
      ],
    });
  }

  private agentLanes(): AgentRunInput['lanes'] {
    return { agentWorkflows: this.lanes.agentWorkflows, cpuTools: this.lanes.cpuTools, gpuTools: this.lanes.gpuTools, snapshots: this.lanes.snapshots };
  }

  /**
   * A new run from a snapshot of another run of the same org: its workspace restored, its state as of
   * the snapshot, the parent's recorded results reused. The manifest is the authority, so a parent that
   * Temporal has already forgotten can still be forked.
   */
  private async fork(command: CommandOf<'agent.fork'>): Promise<Decision> {
    const { org, run_id, payload } = command;
    const from = payload.from_run_id;
    const kind = await this.deps.snapshots.runKind(org, from);
    if (kind === undefined) return { outcome: 'rejected', reason: 'unknown_run', message: `org ${org} has no run '${from}'` };
    if (kind !== 'agent') return { outcome: 'rejected', reason: 'wrong_kind', message: `run '${from}' is not an agent run; only agent runs have snapshots` };
    const found = await this.deps.snapshots.find(org, from, payload.snapshot_id);
    if (!found) return { outcome: 'rejected', reason: 'unknown_snapshot', message: `run '${from}' has no snapshot '${payload.snapshot_id}'` };
    const { row, state } = found;
    if (!row.bundle_object_url || !row.env_universe_id || !state) {
      const why = !row.bundle_object_url ? 'no workspace archive landed' : 'its state was not captured';
      return {
        outcome: 'rejected',
        reason: 'snapshot_unusable',
        message: `snapshot '${row.snapshot_id}' of run '${from}' cannot be forked: ${why} (${row.capture_status}${row.capture_reason ? `: ${row.capture_reason}` : ''})`,
      };
    }
    const shown = state as Partial<Pick<AgentStartPayload, 'goal' | 'max_steps' | 'policy' | 'tier' | 'owner'>>;
    const decision = await this.startAgentRun(
      command.command_id,
      org,
      run_id,
      {
        goal: payload.goal ?? shown.goal ?? 'forked run',
        ...(shown.max_steps ? { max_steps: shown.max_steps } : {}),
        ...(shown.policy ? { policy: shown.policy } : {}),
        ...(shown.tier ? { tier: shown.tier } : {}),
        ...(shown.owner ? { owner: shown.owner } : {}),
        ...(payload.snapshots ? { snapshots: payload.snapshots } : {}),
      },
      {
        input: { from_run_id: from, from_workflow_id: workflowIdFor(org, from), snapshot_id: row.snapshot_id, ...(payload.goal ? { goal: payload.goal } : {}) },
        step: row.step,
      },
    );
    return decision.outcome === 'accepted' ? { outcome: 'accepted', message: `forked from snapshot '${row.snapshot_id}' of run '${from}' at step ${row.step}` } : decision;
  }

  private async startEval(commandId: string, org: string, runId: string, payload: EvalStartPayload, parentRunId?: string): Promise<Decision> {
    const caseIds = payload.case_ids ?? Array.from({ length: payload.cases ?? 0 }, (_, i) => `case-${String(i + 1).padStart(3, '0')}`);
    const input: EvalRunInput = {
      org,
      run_id: runId,
      model: payload.model,
      suite: payload.suite,
      case_ids: caseIds,
      fail_fraction: payload.fail_fraction ?? 0.25,
      reviewers: payload.reviewers ?? ['alice', 'bob'],
      lanes: { agentWorkflows: this.lanes.agentWorkflows, gpuEval: this.lanes.gpuEval },
      ...(parentRunId ? { parent_run_id: parentRunId } : {}),
      ...this.deps.evalDefaults,
    };
    return this.startRun(commandId, org, runId, 'eval', (options) => this.deps.temporal.workflow.start(EvalRun, { ...options, args: [input] }), {
      memo: { model: input.model, suite: input.suite, ...(parentRunId ? { parent_run_id: parentRunId } : {}) },
      attributes: parentRunId ? [{ key: defineSearchAttributeKey('RunParent', 'KEYWORD'), value: parentRunId }] : [],
    });
  }

  /** Starts a run once: the ledger and Temporal both refuse a second run with the same id in an org. */
  private async startRun(
    commandId: string,
    org: string,
    runId: string,
    kind: 'agent' | 'eval',
    start: (options: WorkflowStartOptions) => Promise<unknown>,
    extra: { memo: Record<string, unknown>; attributes: SearchAttributePair[] },
  ): Promise<Decision> {
    const workflowId = workflowIdFor(org, runId);
    const exists: Decision = { outcome: 'rejected', reason: 'run_exists', message: `org ${org} already has a run '${runId}'` };
    // Temporal forgets a closed run after its retention; the ledger does not.
    const startedBy = await this.deps.ledger.acceptedStart(org, runId);
    if (startedBy !== undefined && startedBy !== commandId) return exists;
    try {
      await start({
        workflowId,
        taskQueue: this.lanes.agentWorkflows,
        // A replayed start after the run closed starts nothing.
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
        workflowIdConflictPolicy: 'FAIL',
        memo: { ...extra.memo, [START_COMMAND_MEMO]: commandId },
        typedSearchAttributes: [
          { key: defineSearchAttributeKey('Org', 'KEYWORD'), value: org },
          { key: defineSearchAttributeKey('RunKind', 'KEYWORD'), value: kind },
          { key: defineSearchAttributeKey('AgentStatus', 'KEYWORD'), value: 'queued' },
          ...extra.attributes,
        ],
      });
      return { outcome: 'accepted' };
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
      // Our own earlier attempt may have started it before a crash kept the ledger from saying so.
      const description = await this.deps.temporal.workflow.getHandle(workflowId).describe();
      const memo = description.memo as Record<string, unknown> | undefined;
      return memo?.[START_COMMAND_MEMO] === commandId ? { outcome: 'accepted' } : exists;
    }
  }

  /** A new run `{id}-retry-{n}` over the failed and ungraded cases of a finished eval run. */
  private async retryFailed(command: CommandOf<'eval.retry_failed'>): Promise<Decision> {
    const found = await this.lookUp(command, 'eval');
    if (!('handle' in found)) return found;
    const { handle, description } = found;
    const state = await handle.query(evalStatusQuery);
    if (!['awaiting_review', 'published', 'cancelled', 'failed'].includes(state.status)) {
      return { outcome: 'rejected', reason: 'run_active', message: `run '${command.run_id}' is still ${state.status}; retry its failed cases when it has finished` };
    }
    const retry = Object.entries(state.cases).filter(([, c]) => c.status === 'failed' || c.status === 'ungraded').map(([id]) => id);
    if (retry.length === 0) return { outcome: 'rejected', reason: 'nothing_to_retry', message: `run '${command.run_id}' has no failed or ungraded cases` };
    for (let n = 1; n <= 100; n++) {
      const retryId = `${command.run_id}-retry-${n}`;
      if ((await this.deps.ledger.acceptedStart(command.org, retryId)) !== undefined) continue;
      if (!new RegExp(RUN_ID_PATTERN).test(retryId)) break;
      const memo = description.memo as { model?: string; suite?: string } | undefined;
      const decision = await this.startEval(
        command.command_id,
        command.org,
        retryId,
        { model: memo?.model ?? state.model, suite: memo?.suite ?? state.suite, case_ids: retry, reviewers: state.reviewers },
        command.run_id,
      );
      if (decision.outcome === 'accepted') {
        await this.deps.ledger.recordStart(command.org, command.command_id, retryId);
        return { outcome: 'accepted', message: `started ${retryId} over ${retry.length} cases: ${retry.join(', ')}` };
      }
      if (decision.reason !== 'run_exists') return decision;
    }
    return { outcome: 'rejected', reason: 'invalid_payload', message: `no free retry id for run '${command.run_id}'` };
  }

  private async approve(command: CommandOf<'eval.approve'>): Promise<Decision> {
    return this.update(
      command,
      'eval',
      (handle) => handle.executeUpdate(approveUpdate, { args: [{ command_id: command.command_id, reviewer: command.payload.reviewer }], updateId: command.command_id }),
      (message) =>
        message.startsWith('not_a_reviewer')
          ? { outcome: 'rejected', reason: 'not_a_reviewer', message: message.replace(/^not_a_reviewer: /, '') }
          : { outcome: 'rejected', reason: 'validator_rejected', message },
    );
  }


  /** Looks the run up in its org and checks its kind. */
  private async lookUp(command: Command, kind: 'agent' | 'eval'): Promise<{ handle: WorkflowHandle; description: WorkflowExecutionDescription } | Decision> {
    const handle = this.deps.temporal.workflow.getHandle(workflowIdFor(command.org, command.run_id));
    let description: WorkflowExecutionDescription;
    try {
      description = await handle.describe();
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return this.unknownRun(command);
      throw err;
    }
    if (description.type !== WORKFLOW_TYPE_OF_KIND[kind]) {
      return { outcome: 'rejected', reason: 'wrong_kind', message: `run '${command.run_id}' is not an ${kind} run` };
    }
    return { handle, description };
  }

  /** Looks the run up in its org and checks its kind and that it is still open. */
  private async target(command: Command, kind: 'agent' | 'eval'): Promise<{ handle: WorkflowHandle } | Decision> {
    const found = await this.lookUp(command, kind);
    if (!('handle' in found)) return found;
    const { handle, description } = found;
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
    return this.update(
      command,
      'agent',
      (handle) => handle.executeUpdate(changeGoalUpdate, { args: [{ command_id: command.command_id, goal: command.payload.goal }], updateId: command.command_id }),
      (message) => ({ outcome: 'rejected', reason: 'validator_rejected', message }),
    );
  }

  /** Sends an Update to a run of this org: its validator's refusal becomes the rejection, never history. */
  private async update(
    command: Command,
    kind: 'agent' | 'eval',
    send: (handle: WorkflowHandle) => Promise<string>,
    refused: (message: string) => Decision,
  ): Promise<Decision> {
    const target = await this.target(command, kind);
    if (!('handle' in target)) return target;
    try {
      return { outcome: 'accepted', message: await send(target.handle) };
    } catch (err) {
      if ((err as Error).name === 'WorkflowUpdateFailedError') return refused((err as { cause?: Error }).cause?.message ?? (err as Error).message);
      if (err instanceof WorkflowNotFoundError) return { outcome: 'rejected', reason: 'run_closed', message: `run '${command.run_id}' has already ended` };
      throw err;
    }
  }

}
