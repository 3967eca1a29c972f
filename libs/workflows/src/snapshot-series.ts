import { ActivityFailure, ApplicationFailure, CancellationScope, condition, isCancellation, proxyActivities, TimeoutFailure } from '@temporalio/workflow';
import type { SnapshotRow } from '@agentrun/contracts';
import type { CaptureProgress, CaptureResult, ForkState, SnapshotActivities, SnapshotSeriesCarry, SnapshotSeriesConfig } from './agent-run.types';

/**
 * How much longer than a capture's own bound the final capture waits for an interior one. Strictly
 * longer, never equal: both deadlines are timers on the server, and equal ones could fire together
 * and record a fatal `skipped` final row for a run whose interior capture was about to finish.
 */
export const FINAL_LOCK_GRACE_S = 5;

const now = (): number => Date.now();

export const snapshotIdFor = (ordinal: number): string => `snap-${String(ordinal).padStart(4, '0')}`;

export interface SnapshotSeries {
  /** Starts the ticker, if a cadence is configured. */
  start(): void;
  /** A capture at a turn boundary (after step `turn` completed, before the next starts); no-op unless `per_turn`. */
  turn(turn: number): Promise<void>;
  /** Takes the final capture after the in-flight one, or records a `skipped`/`cancelled` row at once. */
  finish(options: { cancelled: boolean }): Promise<void>;
  /** Stops the series without a final row: the run failed for another reason. */
  abandon(): void;
  /** A cooperative cancel arrived: the capture in flight is cancelled rather than waited for. */
  interrupt(): void;
  /** Before continue-as-new: no capture starts from now on; resolves when none is in flight and the ticker has stopped. */
  handOver(): Promise<void>;
  /** What the next execution needs to go on: budget, ordinals, the ticker's due time. */
  carry(): SnapshotSeriesCarry;
  /** Why the run must fail although the agent succeeded: the final capture did not land. */
  finalMissing(): string | undefined;
  /** The final snapshot's id when it landed with an archive. */
  finalLanded(): string | undefined;
  /** The newest rows, for the status Query. */
  rows(): SnapshotRow[];
  /** The newest row whose archive landed: where a moved workspace is restored from. */
  latestUsable(): { snapshot_id: string; step: number } | undefined;
  /**
   * Captures from now on go to this task queue (the snapshotter of the run's workspace host), waiting at
   * most `scheduleToStartS` for it: a capture on a lost host fails fast instead of holding the series.
   */
  useLane(lane: string, scheduleToStartS?: number): void;
}

export interface SnapshotSeriesOptions {
  org: string;
  run_id: string;
  workflow_id: string;
  lane: string;
  config: SnapshotSeriesConfig;
  /** Set on a workspace host's queue: how long a capture may wait for the host (see `useLane`). */
  scheduleToStartS?: number;
  carry?: SnapshotSeriesCarry;
  /** The agent's state a fork needs, as of now. */
  state(): ForkState;
  /** Publishes a row the moment it lands (a `snapshot_captured` event). */
  record(row: SnapshotRow): void;
}

/** A landed capture as its row says it. */
function capturedRow(base: SnapshotRow, version: number, done: CaptureResult): SnapshotRow {
  return {
    ...base,
    id: done.artifact_id,
    version,
    bundle_object_url: done.bundle_object_url,
    bytes: done.bytes,
    ...(done.trajectory_s3_uri ? { trajectory_s3_uri: done.trajectory_s3_uri } : {}),
    ...(done.trajectory_s3_uri && done.trajectory_segment
      ? { trajectory_first_seq: done.trajectory_segment.first_seq, trajectory_last_seq: done.trajectory_segment.last_seq }
      : {}),
    ...(done.env_universe_id ? { env_universe_id: done.env_universe_id, env_universe_version: done.env_universe_version } : {}),
    ...(done.reasons.length ? { capture_status: 'partial' as const, capture_reason: done.reasons.join('; ') } : {}),
  };
}

/** A capture that failed: `failed`, or `partial` when its last attempt reported the archive landed (the row stays gradable). */
function failedRow(base: SnapshotRow, version: number, err: unknown, timeoutSeconds: number): SnapshotRow {
  const cause = err instanceof ActivityFailure && err.cause ? err.cause : err;
  const timedOut = cause instanceof TimeoutFailure;
  const reason = timedOut
    ? `capture_timeout_${timeoutSeconds}s`
    : `${cause instanceof ApplicationFailure && cause.type ? cause.type : 'CaptureError'}: ${cause instanceof Error ? cause.message : String(cause)}`.slice(0, 300);
  // The snapshotter declined it for the org's snapshot quota: not a failure, and the run goes on.
  if (cause instanceof ApplicationFailure && cause.type === 'quota_exceeded') return { ...base, capture_status: 'skipped', capture_reason: `quota_exceeded: ${cause.message}`.slice(0, 300) };
  const progress = timedOut ? ((cause.lastHeartbeatDetails as CaptureProgress | undefined) ?? undefined) : undefined;
  if (progress?.bundle_object_url) {
    return { ...base, version, bundle_object_url: progress.bundle_object_url, ...(progress.bytes ? { bytes: progress.bytes } : {}), capture_status: 'partial', capture_reason: reason };
  }
  return { ...base, capture_status: 'failed', capture_reason: reason };
}

/**
 * The capture series in workflow code: its ticker is a durable timer, its lock a flag waited on with
 * `condition`, its teardown the run's end. Captures never overlap: the cadence is the gap between
 * captures, and the ticker awaits its own. Each capture is an activity on the `snapshots` lane
 * bounded by schedule-to-close = `timeout_seconds`, so no retry outlives the deadline.
 */
export function openSnapshotSeries(options: SnapshotSeriesOptions): SnapshotSeries {
  return new CaptureSeries(options);
}

class CaptureSeries implements SnapshotSeries {
  private readonly config: SnapshotSeriesConfig;
  private readonly progress: SnapshotSeriesCarry;
  private readonly recent: SnapshotRow[] = [];
  private snapshots: SnapshotActivities;
  private locked = false;
  private stopped = false;
  private finalRow: SnapshotRow | undefined;
  private ticker: CancellationScope | undefined;
  /** The capture in flight, so a cooperative cancel can stop it instead of waiting it out. */
  private inflight: CancellationScope | undefined;
  private interrupted = false;
  /** Set before continue-as-new: no new capture starts in this execution. */
  private handingOver = false;
  private ticking: Promise<void> | undefined;

  constructor(private readonly options: SnapshotSeriesOptions) {
    const { config } = options;
    this.config = config;
    this.progress = options.carry
      ? { ...options.carry }
      : { ordinal: 0, attempts: 0, limit_recorded: false, started_at_ms: now(), ...(config.interval_seconds > 0 ? { next_tick_at_ms: now() + config.interval_seconds * 1000 } : {}) };
    this.snapshots = this.stubFor(options.lane, options.scheduleToStartS);
  }

  private stubFor(lane: string, scheduleToStartS: number | undefined): SnapshotActivities {
    const { config } = this;
    const heartbeat = Math.min(30, Math.max(2, Math.ceil(config.timeout_seconds / 5)));
    return proxyActivities<SnapshotActivities>({
      taskQueue: lane,
      ...(scheduleToStartS !== undefined ? { scheduleToStartTimeout: `${scheduleToStartS}s` } : {}),
      scheduleToCloseTimeout: `${config.timeout_seconds}s`,
      heartbeatTimeout: `${heartbeat}s`,
      retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '10s', nonRetryableErrorTypes: ['WorkspaceMissing'] },
    });
  }

  useLane(lane: string, scheduleToStartS?: number): void {
    this.snapshots = this.stubFor(lane, scheduleToStartS);
  }

  latestUsable(): { snapshot_id: string; step: number } | undefined {
    return this.progress.latest;
  }

  start(): void {
    if (this.config.interval_seconds <= 0 || this.ticking) return;
    const ticker = new CancellationScope();
    this.ticker = ticker;
    this.ticking = ticker.run(() => this.tick()).catch((err: unknown) => {
      if (isCancellation(err)) return;
      // Nothing awaits the ticker until teardown; an escaping error would silently end the cadence.
      this.skip(`ticker_error: ${err instanceof Error ? err.message : String(err)}`.slice(0, 300));
    });
  }

  async turn(turn: number): Promise<void> {
    const { per_turn, every_steps } = this.config;
    if (!(per_turn || (every_steps !== undefined && turn % every_steps === 0)) || this.stopped) return;
    await this.interior(turn);
  }

  async finish({ cancelled }: { cancelled: boolean }): Promise<void> {
    this.stopped = true;
    if (cancelled) {
      // Waiting out the lock and a capture would delay the cancellation by up to twice the timeout.
      this.ticker?.cancel();
      await CancellationScope.nonCancellable(async () => {
        await this.ticking;
        if (!this.finalRow) this.skip('cancelled', { isFinal: true });
      });
      return;
    }
    // Waited out even when there is nothing to capture, so an in-flight capture's row still lands.
    const acquired = await this.acquire(() => this.interrupted, (this.config.timeout_seconds + FINAL_LOCK_GRACE_S) * 1000);
    if (this.interrupted) {
      // A cancel arrived while the final waited or was taken: the run is cancelled, its final row says so.
      if (acquired) this.locked = false;
      return;
    }
    if (!acquired) {
      // The interior capture outlived its own bound; it is abandoned with the run (its object is orphaned, never referenced).
      this.ticker?.cancel();
      if (this.config.at_end) this.skip('final_capture_lock_timeout', { isFinal: true });
      return;
    }
    await this.holding(async () => {
      // The ticker saw `stopped` and ends without the lock.
      await this.ticking;
      if (this.config.at_end) this.land(await this.capture(true));
    });
  }

  async handOver(): Promise<void> {
    this.handingOver = true;
    await condition(() => !this.locked);
    await this.ticking;
  }

  abandon(): void {
    this.stopped = true;
    this.ticker?.cancel();
  }

  interrupt(): void {
    this.stopped = true;
    this.interrupted = true;
    this.inflight?.cancel();
  }

  carry(): SnapshotSeriesCarry {
    return { ...this.progress };
  }

  finalLanded(): string | undefined {
    return this.finalRow?.bundle_object_url ? this.finalRow.snapshot_id : undefined;
  }

  finalMissing(): string | undefined {
    const { finalRow } = this;
    if (!this.config.at_end || this.interrupted) return undefined;
    if (!finalRow) return 'the series recorded no final snapshot';
    if (finalRow.bundle_object_url) return undefined;
    return `the final snapshot did not land (${finalRow.capture_status}: ${finalRow.capture_reason ?? 'no reason'}); the agent finished but its end state cannot be inspected or forked`;
  }

  rows(): SnapshotRow[] {
    return [...this.recent];
  }

  private atLimit(): boolean {
    return this.progress.attempts >= this.config.max_snapshots;
  }

  private row(isFinal: boolean, turn: number | undefined, step: number): SnapshotRow {
    this.progress.ordinal += 1;
    return {
      snapshot_id: snapshotIdFor(this.progress.ordinal),
      ...(turn !== undefined ? { turn } : {}),
      source_agent_name: 'AgentRun',
      source_context_id: this.options.run_id,
      elapsed_s: Math.floor((now() - this.progress.started_at_ms) / 1000),
      captured_at_utc: new Date(now()).toISOString(),
      is_final: isFinal,
      capture_status: 'ok',
      step,
    };
  }

  private land(landed: SnapshotRow): void {
    if (landed.bundle_object_url) this.progress.latest = { snapshot_id: landed.snapshot_id, step: landed.step };
    // Only a segment that landed moves the start of the next one, so a failed capture loses no events.
    if (landed.trajectory_last_seq !== undefined && landed.trajectory_first_seq !== undefined) {
      this.progress.trajectory = { first_seq: landed.trajectory_first_seq, last_seq: landed.trajectory_last_seq };
    }
    this.recent.push(landed);
    if (this.recent.length > 50) this.recent.shift();
    if (landed.is_final) this.finalRow = landed;
    this.options.record(landed);
  }

  private skip(reason: string, extra: { isFinal?: boolean; turn?: number } = {}): void {
    this.land({ ...this.row(extra.isFinal ?? false, extra.turn, this.options.state().step), capture_status: 'skipped', capture_reason: reason });
  }

  /** One capture, never failing the run: a failure becomes a `failed` (or, with the archive landed, `partial`) row. */
  private async capture(isFinal: boolean, turn?: number): Promise<SnapshotRow> {
    const { options } = this;
    const state = options.state();
    const base = this.row(isFinal, turn, state.step);
    const version = this.progress.ordinal;
    try {
      const done = await this.snapshots.captureSnapshot({
        org: options.org,
        run_id: options.run_id,
        workflow_id: options.workflow_id,
        snapshot_id: base.snapshot_id,
        version,
        is_final: isFinal,
        state,
        ...(this.progress.trajectory ? { trajectory_after: { ...this.progress.trajectory } } : {}),
      });
      return capturedRow(base, version, done);
    } catch (err) {
      if (isCancellation(err)) throw err;
      return failedRow(base, version, err, this.config.timeout_seconds);
    }
  }

  /**
   * Takes the lock, or gives up when `until` turns true first (or `timeoutMs` passes). Checked again
   * after each wake-up: two waiters can be woken in the same activation, and only one may win.
   */
  private async acquire(until: () => boolean, timeoutMs?: number): Promise<boolean> {
    const deadline = timeoutMs === undefined ? undefined : now() + timeoutMs;
    for (;;) {
      if (until()) return false;
      if (!this.locked) {
        this.locked = true;
        return true;
      }
      if (deadline === undefined) await condition(() => !this.locked || until());
      else if (!(await condition(() => !this.locked || until(), Math.max(1, deadline - now())))) {
        // The timer and the capture's end can land in one activation, the timer first: a lock freed
        // by then was freed in time.
        if (!this.locked && !until()) {
          this.locked = true;
          return true;
        }
        return false;
      }
    }
  }

  /** Runs `fn` holding the lock, in a scope `interrupt()` can cancel; an interrupted capture records nothing. */
  private async holding(fn: () => Promise<void>): Promise<void> {
    const scope = new CancellationScope();
    this.inflight = scope;
    try {
      await scope.run(fn);
    } catch (err) {
      if (!(this.interrupted && isCancellation(err))) throw err;
    } finally {
      this.inflight = undefined;
      this.locked = false;
    }
  }

  /**
   * One interior capture within the budget; false when the series is closed or the budget is spent.
   * The budget is checked again once the lock is ours (teardown, or the other contender, may have
   * moved on while this waited), and a spent budget is recorded once, by whichever contender meets it.
   */
  private async interior(turn?: number): Promise<boolean> {
    if (!this.atLimit() && (await this.acquire(() => this.stopped || this.handingOver))) {
      if (!this.atLimit()) {
        await this.holding(async () => {
          this.progress.attempts += 1;
          this.land(await this.capture(false, turn));
        });
        return true;
      }
      this.locked = false;
    }
    if (this.atLimit() && !this.progress.limit_recorded) {
      this.progress.limit_recorded = true;
      this.skip('limit_reached', turn !== undefined ? { turn } : {});
    }
    return false;
  }

  private async tick(): Promise<void> {
    for (;;) {
      const due = this.progress.next_tick_at_ms ?? now();
      // Not sleep(): teardown wakes the ticker at once instead of letting it sleep out the interval.
      if (await condition(() => this.stopped || this.handingOver, Math.max(1, due - now()))) return;
      // A spent budget stops the ticker; the final capture is left to teardown, so ticks never use up the grade of record.
      if (!(await this.interior())) return;
      if (this.handingOver) return;
      this.progress.next_tick_at_ms = now() + this.config.interval_seconds * 1000;
    }
  }
}
