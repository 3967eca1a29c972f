import { ActivityFailure, allHandlersFinished, ApplicationFailure, CancellationScope, condition, isCancellation, upsertSearchAttributes } from '@temporalio/workflow';
import type { AgentStatus, BudgetShortfall, RunBudget } from '@agentrun/contracts';
import type { AgentCarry, AgentRunInput, RestoreResult, WorkspacePlacement } from './agent-run.types';
import type { AgentLoopState } from './agent-run.state';
import type { AgentRunActivities } from './agent-run.steps';
import { cancelPending } from './conversation';
import type { EmitFields, Outbox, StatusEventType } from './outbox';
import { AGENT_STATUS_KEY, CURRENT_STEP_KEY } from './search-attributes';
import type { SeriesSlot } from './workspace-hosts';

/** Why a run failed, as its `reason` names it, by the failure type that ended it. */
function reasonFor(type: string | null | undefined): string {
  if (type === 'LaneStalled') return 'lane_stalled';
  if (type === 'FinalSnapshotMissing') return 'final_snapshot_missing';
  if (type === 'SnapshotUnusable') return 'snapshot_unusable';
  if (type === 'WorkspaceHostLost') return 'workspace_host_lost';
  return 'activity_failed';
}

/**
 * How a run starts, pauses, is cancelled, fails, hands over and ends: status changes with their
 * search attributes and events, the saga's compensations, the outbox drained before the end.
 */
export class RunLifecycle {
  constructor(
    private readonly input: AgentRunInput,
    private readonly run: AgentLoopState,
    private readonly outbox: Outbox,
    private readonly slot: SeriesSlot,
    private readonly activities: Pick<AgentRunActivities, 'cpu' | 'restorer' | 'saga'>,
  ) {}

  setStatus<T extends StatusEventType = 'status_changed'>(next: AgentStatus, type?: T, ...fields: EmitFields<T>): void {
    this.run.status = next;
    upsertSearchAttributes([
      { key: AGENT_STATUS_KEY, value: next },
      { key: CURRENT_STEP_KEY, value: this.run.step },
    ]);
    this.outbox.emit((type ?? 'status_changed') as T, ...fields);
  }

  /** Announced first, so watchers see the run the moment it exists; the workspace comes next. */
  started(): Promise<WorkspacePlacement | void> {
    this.setStatus('running', 'run_started');
    return this.activities.cpu.prepareWorkspace({ org: this.input.org, run_id: this.input.run_id, goal: this.run.goal, ...(this.input.seed ? { seed: this.input.seed } : {}) });
  }

  /** A fork's first step: the snapshot's workspace restored into this run's, and the state it starts from. */
  restore(fork: NonNullable<AgentRunInput['fork']>): Promise<RestoreResult> {
    return this.activities.restorer.restoreSnapshot({ org: this.input.org, run_id: this.input.run_id, from_run_id: fork.from_run_id, snapshot_id: fork.snapshot_id });
  }

  /** A fork starts where its snapshot was: state as of then, and a parent link in its first event. */
  forked(fork: NonNullable<AgentRunInput['fork']>, restored: RestoreResult): void {
    this.run.adoptSnapshot(restored);
    this.setStatus('running', 'run_started', {
      forked_from: { run_id: fork.from_run_id, snapshot_id: fork.snapshot_id, step: this.run.step },
      restored: { files: restored.files, bytes: restored.bytes },
    });
  }

  /** Resolves when the run may take its next step: not paused, or cancelling. */
  untilRunnable(): Promise<void> {
    return condition(() => !this.run.paused || this.run.cancelRequested);
  }

  pause(commandId: string): void {
    this.run.paused = true;
    this.setStatus('paused', 'status_changed', { command_id: commandId });
  }

  resume(commandId: string): void {
    this.run.paused = false;
    this.run.budgetPaused = false;
    this.setStatus('running', 'status_changed', { command_id: commandId });
  }

  /** A model call did not fit a budget: the run waits, paused, to make it again (nothing failed, nothing was spent). */
  budgetExhausted(step: number, shortfall: BudgetShortfall): void {
    this.run.paused = true;
    this.run.budgetPaused = true;
    this.setStatus('paused', 'budget_exhausted', { step, ...shortfall });
  }

  /** New limits; a run paused on its budget goes on (its call is tried against them). */
  budgetRaised(commandId: string, limits: RunBudget): void {
    const previous = this.run.spendLimit ?? {};
    this.run.spendLimit = { ...previous, ...limits };
    if (this.run.budgetPaused) {
      this.run.paused = false;
      this.run.budgetPaused = false;
      this.setStatus('running', 'budget_raised', { command_id: commandId, previous });
    } else this.outbox.emit('budget_raised', { command_id: commandId, previous });
  }

  /** A cooperative cancel: the loop takes it at its next turn. */
  requestCancel(commandId: string): void {
    this.run.cancelRequested = true;
    this.run.paused = false;
    // A capture in flight is given up, not waited out (it could take up to its timeout).
    this.slot.series?.interrupt();
    this.setStatus('cancelling', 'status_changed', { command_id: commandId });
  }

  /** Ends a cooperatively cancelled run: its final row, what it holds given back, then the status. */
  async cancel(): Promise<void> {
    this.run.conversation = cancelPending(this.run.conversation);
    await this.slot.series?.finish({ cancelled: true });
    await this.compensate();
    this.setStatus('cancelled', 'run_finished');
  }

  /** The agent finished and its final capture (if any) landed: the run is done. */
  done(): void {
    const { conversation } = this.run;
    this.setStatus('done', 'run_finished', this.input.policy === 'llm' && conversation.answer !== undefined ? { answer: conversation.answer.slice(0, 4_000) } : {});
  }

  /**
   * Before continue-as-new: no capture straddles the hand-over (none starts from here on, the one in
   * flight lands in this execution), every handler has returned and every event is out. False when a
   * cancel was accepted meanwhile: the loop takes it instead of handing it over.
   */
  async readyToHandOver(): Promise<boolean> {
    await this.slot.series?.handOver();
    await condition(allHandlersFinished);
    await this.outbox.flushed();
    return !this.run.cancelRequested;
  }

  carry(): AgentCarry {
    return this.run.carry(this.outbox.seq(), this.slot.series?.carry());
  }

  /** The run ended normally: handlers finish and the outbox empties before the result goes back. */
  async close(): Promise<void> {
    await condition(allHandlersFinished);
    await this.outbox.drain();
  }

  /**
   * The loop threw. A Temporal cancellation is recorded, published and left standing; anything else
   * fails the run with a reason watchers can act on.
   */
  async settle(err: unknown): Promise<never> {
    if (isCancellation(err)) {
      this.run.conversation = cancelPending(this.run.conversation);
      await CancellationScope.nonCancellable(async () => this.slot.series?.finish({ cancelled: true }));
      await this.compensate();
      await CancellationScope.nonCancellable(async () => {
        this.setStatus('cancelled', 'run_finished');
        await this.outbox.drain();
      });
      throw err;
    }
    const cause = err instanceof ActivityFailure && err.cause ? err.cause : err;
    const type = cause instanceof ApplicationFailure ? cause.type : undefined;
    const failure = { reason: reasonFor(type), message: cause instanceof Error ? cause.message : String(cause) };
    this.run.failure = failure;
    this.slot.series?.abandon();
    this.setStatus('failed', 'run_finished');
    await this.outbox.drain();
    throw ApplicationFailure.nonRetryable(failure.message, failure.reason);
  }

  /** Undoes what is held, newest first, even while the run is being cancelled. */
  private async compensate(): Promise<void> {
    const { compensations } = this.run;
    await CancellationScope.nonCancellable(async () => {
      while (compensations.length) {
        const name = compensations[compensations.length - 1];
        await this.activities.saga.compensate({ org: this.input.org, run_id: this.input.run_id, name });
        compensations.pop();
        this.outbox.emit('compensated', { name });
      }
    });
  }
}
