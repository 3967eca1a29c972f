import { ActivityFailure, ApplicationFailure, CancellationScope, condition, isCancellation, proxyActivities, TimeoutFailure } from '@temporalio/workflow';
import type { SnapshotRow } from '@agentrun/contracts';
import type { CaptureProgress, ForkState, SnapshotActivities, SnapshotSeriesCarry, SnapshotSeriesConfig } from './agent-run.types';

/**
 * How much longer than a capture's own bound the final capture waits for an interior one. Strictly
 * longer, never equal: both deadlines are timers on the server, and equal ones could fire together
 * and record a fatal `skipped` final row for a run whose interior capture was about to finish.
 */
export const FINAL_LOCK_GRACE_S = 5;

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
  /** The newest rows, for the status Query. */
  rows(): SnapshotRow[];
}

export interface SnapshotSeriesOptions {
  org: string;
  run_id: string;
  workflow_id: string;
  lane: string;
  config: SnapshotSeriesConfig;
  carry?: SnapshotSeriesCarry;
  /** The agent's state a fork needs, as of now. */
  state(): ForkState;
  /** Publishes a row the moment it lands (a `snapshot_captured` event). */
  record(row: SnapshotRow): void;
}

/**
 * The capture series of the reference, in workflow code: its ticker becomes a durable timer, its lock
 * a flag waited on with `condition`, its teardown the run's end. Captures never overlap: the cadence is
 * the gap between captures, and the ticker awaits its own. Each capture is an activity on the
 * `snapshots` lane bounded by schedule-to-close = `timeout_seconds`, so no retry outlives the deadline.
 */
export function openSnapshotSeries(options: SnapshotSeriesOptions): SnapshotSeries {
  const { config } = options;
  const now = (): number => Date.now();
  const carry: SnapshotSeriesCarry = options.carry
    ? { ...options.carry }
    : { ordinal: 0, attempts: 0, limit_recorded: false, started_at_ms: now(), ...(config.interval_seconds > 0 ? { next_tick_at_ms: now() + config.interval_seconds * 1000 } : {}) };
  const recent: SnapshotRow[] = [];
  let locked = false;
  let stopped = false;
  let finalRow: SnapshotRow | undefined;
  let ticker: CancellationScope | undefined;
  /** The capture in flight, so a cooperative cancel can stop it instead of waiting it out. */
  let inflight: CancellationScope | undefined;
  let interrupted = false;
  /** Set before continue-as-new: no new capture starts in this execution. */
  let handingOver = false;
  let ticking: Promise<void> | undefined;

  const heartbeat = Math.min(30, Math.max(2, Math.ceil(config.timeout_seconds / 5)));
  const snapshots = proxyActivities<SnapshotActivities>({
    taskQueue: options.lane,
    scheduleToCloseTimeout: `${config.timeout_seconds}s`,
    heartbeatTimeout: `${heartbeat}s`,
    retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '10s', nonRetryableErrorTypes: ['WorkspaceMissing'] },
  });

  const atLimit = (): boolean => carry.attempts >= config.max_snapshots;

  const row = (isFinal: boolean, turn: number | undefined, step: number): SnapshotRow => {
    carry.ordinal += 1;
    return {
      snapshot_id: snapshotIdFor(carry.ordinal),
      ...(turn !== undefined ? { turn } : {}),
      source_agent_name: 'AgentRun',
      source_context_id: options.run_id,
      elapsed_s: Math.floor((now() - carry.started_at_ms) / 1000),
      captured_at_utc: new Date(now()).toISOString(),
      is_final: isFinal,
      capture_status: 'ok',
      step,
    };
  };

  const land = (landed: SnapshotRow): void => {
    recent.push(landed);
    if (recent.length > 50) recent.shift();
    if (landed.is_final) finalRow = landed;
    options.record(landed);
  };

  const skip = (reason: string, extra: { isFinal?: boolean; turn?: number } = {}): void => {
    land({ ...row(extra.isFinal ?? false, extra.turn, options.state().step), capture_status: 'skipped', capture_reason: reason });
  };

  /** One capture, never failing the run: a failure becomes a `failed` (or, with the archive landed, `partial`) row. */
  const capture = async (isFinal: boolean, turn?: number): Promise<SnapshotRow> => {
    const state = options.state();
    const base = row(isFinal, turn, state.step);
    const version = carry.ordinal;
    try {
      const done = await snapshots.captureSnapshot({
        org: options.org,
        run_id: options.run_id,
        workflow_id: options.workflow_id,
        snapshot_id: base.snapshot_id,
        version,
        is_final: isFinal,
        state,
      });
      return {
        ...base,
        id: done.artifact_id,
        version,
        bundle_object_url: done.bundle_object_url,
        bytes: done.bytes,
        ...(done.trajectory_s3_uri ? { trajectory_s3_uri: done.trajectory_s3_uri } : {}),
        ...(done.env_universe_id ? { env_universe_id: done.env_universe_id, env_universe_version: done.env_universe_version } : {}),
        ...(done.reasons.length ? { capture_status: 'partial' as const, capture_reason: done.reasons.join('; ') } : {}),
      };
    } catch (err) {
      if (isCancellation(err)) throw err;
      const cause = err instanceof ActivityFailure && err.cause ? err.cause : err;
      const timedOut = cause instanceof TimeoutFailure;
      const reason = timedOut
        ? `capture_timeout_${config.timeout_seconds}s`
        : `${cause instanceof ApplicationFailure && cause.type ? cause.type : 'CaptureError'}: ${cause instanceof Error ? cause.message : String(cause)}`.slice(0, 300);
      // What the last attempt reported before it timed out: an archive that landed keeps the row gradable.
      const progress = timedOut ? ((cause.lastHeartbeatDetails as CaptureProgress | undefined) ?? undefined) : undefined;
      if (progress?.bundle_object_url) {
        return { ...base, version, bundle_object_url: progress.bundle_object_url, ...(progress.bytes ? { bytes: progress.bytes } : {}), capture_status: 'partial', capture_reason: reason };
      }
      return { ...base, capture_status: 'failed', capture_reason: reason };
    }
  };

  /**
   * Takes the lock, or gives up when `until` turns true first (or `timeoutMs` passes). Checked again
   * after each wake-up: two waiters can be woken in the same activation, and only one may win.
   */
  const acquire = async (until: () => boolean, timeoutMs?: number): Promise<boolean> => {
    const deadline = timeoutMs === undefined ? undefined : now() + timeoutMs;
    for (;;) {
      if (until()) return false;
      if (!locked) {
        locked = true;
        return true;
      }
      if (deadline === undefined) await condition(() => !locked || until());
      else if (!(await condition(() => !locked || until(), Math.max(1, deadline - now())))) {
        // The timer and the capture's end can land in one activation, the timer first: a lock freed
        // by then was freed in time.
        if (!locked && !until()) {
          locked = true;
          return true;
        }
        return false;
      }
    }
  };

  /** Runs `fn` holding the lock, in a scope `interrupt()` can cancel; an interrupted capture records nothing. */
  const holding = async (fn: () => Promise<void>): Promise<void> => {
    const scope = new CancellationScope();
    inflight = scope;
    try {
      await scope.run(fn);
    } catch (err) {
      if (!(interrupted && isCancellation(err))) throw err;
    } finally {
      inflight = undefined;
      locked = false;
    }
  };

  /**
   * One interior capture within the budget; false when the series is closed or the budget is spent.
   * The budget is checked again once the lock is ours (teardown, or the other contender, may have
   * moved on while this waited), and a spent budget is recorded once, by whichever contender meets it.
   */
  const interior = async (turn?: number): Promise<boolean> => {
    if (!atLimit() && (await acquire(() => stopped || handingOver))) {
      if (!atLimit()) {
        await holding(async () => {
          carry.attempts += 1;
          land(await capture(false, turn));
        });
        return true;
      }
      locked = false;
    }
    if (atLimit() && !carry.limit_recorded) {
      carry.limit_recorded = true;
      skip('limit_reached', turn !== undefined ? { turn } : {});
    }
    return false;
  };

  const tick = async (): Promise<void> => {
    for (;;) {
      const due = carry.next_tick_at_ms ?? now();
      // Not sleep(): teardown wakes the ticker at once instead of letting it sleep out the interval.
      if (await condition(() => stopped || handingOver, Math.max(1, due - now()))) return;
      // A spent budget stops the ticker; the final capture is left to teardown, so ticks never use up the grade of record.
      if (!(await interior())) return;
      if (handingOver) return;
      carry.next_tick_at_ms = now() + config.interval_seconds * 1000;
    }
  };

  return {
    start() {
      if (config.interval_seconds <= 0 || ticking) return;
      ticker = new CancellationScope();
      ticking = ticker.run(tick).catch((err: unknown) => {
        if (isCancellation(err)) return;
        // Nothing awaits the ticker until teardown; an escaping error would silently end the cadence.
        skip(`ticker_error: ${err instanceof Error ? err.message : String(err)}`.slice(0, 300));
      });
    },

    async turn(turn) {
      if (!config.per_turn || stopped) return;
      await interior(turn);
    },

    async finish({ cancelled }) {
      stopped = true;
      if (cancelled) {
        // Waiting out the lock and a capture would delay the cancellation by up to twice the timeout.
        ticker?.cancel();
        await CancellationScope.nonCancellable(async () => {
          await ticking;
          if (!finalRow) skip('cancelled', { isFinal: true });
        });
        return;
      }
      // Waited out even when there is nothing to capture, so an in-flight capture's row still lands.
      const acquired = await acquire(() => interrupted, (config.timeout_seconds + FINAL_LOCK_GRACE_S) * 1000);
      if (interrupted) {
        // A cancel arrived while the final waited or was taken: the run is cancelled, its final row says so.
        if (acquired) locked = false;
        return;
      }
      if (!acquired) {
        // The interior capture outlived its own bound; it is abandoned with the run (its object is orphaned, never referenced).
        ticker?.cancel();
        if (config.at_end) skip('final_capture_lock_timeout', { isFinal: true });
        return;
      }
      await holding(async () => {
        // The ticker saw `stopped` and ends without the lock.
        await ticking;
        if (config.at_end) land(await capture(true));
      });
    },

    async handOver() {
      handingOver = true;
      await condition(() => !locked);
      await ticking;
    },

    abandon() {
      stopped = true;
      ticker?.cancel();
    },

    interrupt() {
      stopped = true;
      interrupted = true;
      inflight?.cancel();
    },

    carry: () => ({ ...carry }),

    finalMissing() {
      if (!config.at_end || interrupted) return undefined;
      if (!finalRow) return 'the series recorded no final snapshot';
      if (finalRow.bundle_object_url) return undefined;
      return `the final snapshot did not land (${finalRow.capture_status}: ${finalRow.capture_reason ?? 'no reason'}); the agent finished but its end state cannot be inspected or forked`;
    },

    rows: () => [...recent],
  };
}
