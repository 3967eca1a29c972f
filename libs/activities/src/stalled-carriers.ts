import type { RunEventEnvelope } from '@agentrun/contracts';
import { CARRIED_EVENTS_KEY, isCarriedEvents, TRACEPARENT_MEMO } from '@agentrun/workflows';
import { contextOfTraceparent, processMetrics } from '@agentrun/telemetry';
import { requestsOf, sendRunEvents, type PublishDeps } from './publish.activities';

/** One execution of a workflow, as the SDK's sink calls name it. */
export interface WatchedExecution {
  workflowId: string;
  runId: string;
  /** The run's memo: the send span is a child of the `traceparent` its starter left there, as the run's other sends are. */
  memo?: Record<string, unknown>;
}

/**
 * What the watch reads from Temporal (`temporalCarrierReader` in libs/runtime): the ids of the
 * execution's activities that are scheduled and not yet started, and, for those ids, the arguments
 * their scheduled events recorded (in the order they were scheduled).
 */
export interface CarrierReader {
  queuedActivities(execution: WatchedExecution): Promise<string[]>;
  scheduledArguments(execution: WatchedExecution, activityIds: ReadonlySet<string>): Promise<unknown[][]>;
}

export interface StalledCarrierOptions {
  /** How long a carried call may stay unstarted before its events go out without it. */
  afterMs: number;
  log?: (message: string) => void;
}

type Watch = { execution: WatchedExecution; carriers: number; timer?: NodeJS.Timeout };

/**
 * The workflow worker's watch on carried calls (the carried outbox's `carrying` and `landed` sink
 * calls). A carrier holds its run's events until its worker starts it; on a lane that queues (the
 * GPU lane at its slots, or with its worker stopped) that could be seconds or an outage, and the run's
 * stream would stand still at its last published step. So once a run has had a carrier outstanding for
 * `afterMs`, the watch asks Temporal which of its activities are scheduled and not started, reads
 * their scheduled events from the end of the history, and publishes the events those carry: only what
 * a completed workflow task recorded, as every publisher here. The carrier's worker publishes them
 * again when it starts (consumers dedupe by seq); the workflow, which is not told, treats them as
 * it would any unconfirmed events.
 *
 * One look per run per outstanding stretch: after a look that found nothing queued, or published
 * what it found, the run is watched again only when it schedules another carrier. A look that failed
 * (Temporal or Kafka away) is tried again after `afterMs`. Not during replay: a carrier scheduled
 * before this worker took the run over is not watched (its own worker still publishes its events).
 */
export class StalledCarriers {
  private readonly watches = new Map<string, Watch>();
  private readonly looking = new Set<Promise<void>>();
  private reader?: CarrierReader;
  private stopped = false;

  constructor(
    private readonly deps: PublishDeps,
    private readonly options: StalledCarrierOptions,
  ) {
    // Declared with the watch, so a scrape shows it at 0 before anything stalls.
    processMetrics().stalledCarrierEvents();
  }

  /** Where the watch reads Temporal: set once the workers' connection is open (looks wait for it). */
  attach(reader: CarrierReader): void {
    this.reader = reader;
  }

  carrying(execution: WatchedExecution): void {
    if (this.stopped) return;
    const key = keyOf(execution);
    const watch = this.watches.get(key) ?? { execution, carriers: 0 };
    watch.carriers += 1;
    this.watches.set(key, watch);
    this.arm(key, watch);
  }

  landed(execution: WatchedExecution): void {
    const key = keyOf(execution);
    const watch = this.watches.get(key);
    // A carrier scheduled before this worker had the run (its `carrying` was replayed) is not counted.
    if (!watch) return;
    watch.carriers -= 1;
    if (watch.carriers > 0) return;
    clearTimeout(watch.timer);
    this.watches.delete(key);
  }

  /** The runs watched now (for tests and the log). */
  get size(): number {
    return this.watches.size;
  }

  /** No new watches; the ones armed are dropped; looks under way finish. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const watch of this.watches.values()) clearTimeout(watch.timer);
    this.watches.clear();
    await Promise.all([...this.looking]);
  }

  private arm(key: string, watch: Watch): void {
    if (watch.timer || this.stopped) return;
    watch.timer = setTimeout(() => {
      watch.timer = undefined;
      const look = this.look(key, watch).finally(() => this.looking.delete(look));
      this.looking.add(look);
    }, this.options.afterMs);
    // A watch never keeps the process up.
    watch.timer.unref();
  }

  private async look(key: string, watch: Watch): Promise<void> {
    const again = () => {
      if (this.watches.get(key) === watch) this.arm(key, watch);
    };
    if (!this.reader) return again();
    const metrics = processMetrics().runEventPublishing();
    let sending = false;
    try {
      const queued = await this.reader.queuedActivities(watch.execution);
      if (queued.length === 0) return;
      const batches = (await this.reader.scheduledArguments(watch.execution, new Set(queued)))
        .map((args) => args[args.length - 1])
        .filter(isCarriedEvents)
        .map((carried) => carried[CARRIED_EVENTS_KEY] as RunEventEnvelope[])
        .filter((events) => events.length > 0);
      sending = true;
      const traceparent = watch.execution.memo?.[TRACEPARENT_MEMO];
      const parent = typeof traceparent === 'string' ? contextOfTraceparent(traceparent) : undefined;
      for (const events of batches) {
        for (const part of requestsOf(events)) await sendRunEvents(this.deps, part, parent);
        metrics.published.inc(events.length);
        processMetrics().stalledCarrierEvents().inc(events.length);
        this.options.log?.(
          `published ${watch.execution.workflowId}'s run events ${events[0].seq}..${events[events.length - 1].seq}: the call carrying them had not started after ${this.options.afterMs} ms`,
        );
      }
    } catch (err) {
      if (sending) metrics.failures.inc();
      this.options.log?.(`could not look at ${watch.execution.workflowId}'s carried calls (tried again): ${err instanceof Error ? err.message : String(err)}`);
      again();
    }
  }
}

function keyOf(execution: WatchedExecution): string {
  return `${execution.workflowId}\u0000${execution.runId}`;
}
