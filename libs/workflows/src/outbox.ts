import { CancellationScope, condition, patched, proxyActivities, proxySinks, type Sinks } from '@temporalio/workflow';
import type { RunEventEnvelope, RunEventFieldsOf, RunEventType, RunKind, RunState } from '@agentrun/contracts';
import type { PublishActivities } from './agent-run.types';
import type { Patches } from './patches';
import { FOREVER } from './retry-policies';

/** Executions that publish by activity send batches of at most this many events per activity. */
const PUBLISH_BATCH = 100;
/**
 * And of at most about this many bytes: an activity's input must stay under Temporal's 2 MiB payload
 * limit, and an eval's events each carry every case's view, so 100 of a 500-case eval's would not.
 */
const PUBLISH_BATCH_BYTES = 1024 * 1024;

/** The first events of the queue that fit one batch; always at least one, however large. */
function nextBatch(queue: RunEventEnvelope[]): RunEventEnvelope[] {
  let bytes = 0;
  let n = 0;
  while (n < queue.length && n < PUBLISH_BATCH) {
    bytes += JSON.stringify(queue[n]).length;
    if (n > 0 && bytes > PUBLISH_BATCH_BYTES) break;
    n += 1;
  }
  return queue.slice(0, n);
}

/** An event type's own fields, as `emit` takes them: optional only when every field is. */
export type EmitFields<T extends RunEventType> = object extends RunEventFieldsOf<T> ? [fields?: RunEventFieldsOf<T>] : [fields: RunEventFieldsOf<T>];

/** The events that carry a status change. */
export type StatusEventType = 'status_changed' | 'run_started' | 'run_finished' | 'budget_exhausted' | 'budget_raised';

export interface Outbox {
  /** Assigns the next seq and queues the event; the run's state is attached to every event. */
  emit<T extends RunEventType>(type: T, ...fields: EmitFields<T>): void;
  /** Resolves once every event emitted so far is on the topic; the loop goes on. */
  flushed(): Promise<void>;
  /** Resolves once every event is on the topic and the loop has ended: only when the run is over. */
  drain(): Promise<void>;
  /** The last seq assigned. */
  seq(): number;
  /**
   * The same `proxyActivities` functions, their calls carrying the run's unpublished events to the worker that
   * runs them (only in executions that publish that way; unchanged otherwise). Only for
   * lanes whose workers publish what they carry (the orchestrator's `cpu-tools`, the GPU worker's
   * `gpu-tools`). With `since`, only in executions that record that patch's marker: a lane that began
   * carrying later, so executions recorded before it replay with the calls they made then.
   */
  carry<T extends object>(activities: T, since?: string): T;
  /**
   * One call that is not made through `proxyActivities` (a child workflow's start) carrying the unpublished
   * events: `send` gets them, or undefined when it carries none, and its result is unwrapped as a
   * carried activity's is. With `since`, only in executions that record that patch's marker.
   */
  carryWith<R>(send: (carried: CarriedEvents | undefined) => Promise<R | CarriedResult>, since?: string): Promise<R>;
}

/**
 * What a carried activity call gets as its last argument: the run's events not yet known to be on
 * the topic, in seq order from the first of them. The worker that runs the activity publishes them
 * before it runs the activity (`carriedEventsInterceptor` in libs/activities) and says so in the result.
 */
export const CARRIED_EVENTS_KEY = 'agentrun_run_events';
/** The key of a carried call's result that says the events went out (the activity's own result is `value`). */
export const CARRIED_RESULT_KEY = 'agentrun_run_events_published_through';
export type CarriedEvents = { [CARRIED_EVENTS_KEY]: RunEventEnvelope[] };
export type CarriedResult = { [CARRIED_RESULT_KEY]: number; value: unknown };

export function isCarriedEvents(value: unknown): value is CarriedEvents {
  return typeof value === 'object' && value !== null && Array.isArray((value as Record<string, unknown>)[CARRIED_EVENTS_KEY]);
}

export function isCarriedResult(value: unknown): value is CarriedResult {
  return typeof value === 'object' && value !== null && typeof (value as Record<string, unknown>)[CARRIED_RESULT_KEY] === 'number';
}

/**
 * How the workflow hands its run events to the worker it runs on. The worker's sink publishes each
 * workflow task's events and returns only once Kafka has acknowledged them; the Temporal SDK awaits
 * sinks before it reports the task complete. So an event is on the topic before the task that
 * emitted it is in the history, at no Temporal action and no history event of its own.
 *
 * That is also why it is not the default. A task that never completes (its worker killed, its
 * timeout passed) runs again, and the server hands the new attempt whatever arrived meanwhile (a
 * signal, an activity's result) in the same activation: the attempt can emit different events under
 * the seqs the first attempt already published (the fault matrix saw a `context_injected` and a
 * `snapshot_captured` both published as seq 7), and consumers keep the first of each seq. The carried
 * and activity outboxes publish only what a completed task recorded, so a repeat is always the same event.
 */
export interface RunEventSinks extends Sinks {
  runEvents: {
    /** Publishes (not during replay: those events went out when their task first ran). */
    publish(events: RunEventEnvelope[]): void;
    /**
     * A carried call was scheduled with events through `through` (carried outbox; not during replay).
     * The worker watches the run: a carrier its lane has not started after a while (the GPU lane
     * queued, or nobody serving it) has its events published by the workflow's worker instead, read
     * from the call's scheduled event in the history, so still only what a completed task recorded.
     */
    carrying(through: number): void;
    /** That carried call settled (completed, failed or cancelled): the watch on it ends. */
    landed(through: number): void;
  };
}

/**
 * The memo entry that holds the `traceparent` a run was started in (written by the starter, kept by
 * continue-as-new): the sink's send spans are its children, so a run's events share its trace.
 */
export const TRACEPARENT_MEMO = 'traceparent';

/** Marks the executions that publish through the sink; those recorded before it publish by activity. */
export const PUBLISH_BY_SINK_PATCH = 'run-events-published-by-the-workflow-task';

export type EventsVia = 'activity' | 'carried';

type OutboxOptions = {
  org: string;
  run_id: string;
  kind: RunKind;
  lane: string;
  firstSeq: number;
  state: () => RunState;
  eventsVia?: EventsVia;
  /** How `carry` and `carryWith` ask their `since` patch (default: the SDK's `patched`). */
  patches?: Patches;
};

/**
 * The run's outbox: seq is assigned here and nowhere else, and events leave in seq order. New
 * executions carry their events on their calls, or publish them by activity (their input says which:
 * AGENTRUN_RUN_EVENTS_VIA); those recorded with the sink's patch marker keep the sink, so they replay.
 */
export function openOutbox(options: OutboxOptions): Outbox {
  if (options.eventsVia === 'carried') return carriedOutbox(options);
  return publishesBySink(options.eventsVia, options.patches) ? sinkOutbox(options) : activityOutbox(options);
}

/**
 * True for executions that publish through the sink: new ones, unless their input asks for the
 * activity. Asked once per execution, first thing (the patch's marker goes in its first task); an
 * execution whose input asks for the activity never asks `patched`, so it records no marker either.
 */
export function publishesBySink(eventsVia: EventsVia | undefined, patches?: Patches): boolean {
  return eventsVia === undefined && (patches ? patches.has(PUBLISH_BY_SINK_PATCH) : patched(PUBLISH_BY_SINK_PATCH));
}

function envelope(options: OutboxOptions, seq: number, type: RunEventType, fields: object | undefined): RunEventEnvelope {
  return {
    run_id: options.run_id,
    org: options.org,
    kind: options.kind,
    seq,
    type,
    ts: new Date().toISOString(),
    payload: { ...fields, state: options.state() },
  };
}

/** Every event goes to the sink as it is emitted; it is on the topic once the workflow task completes. */
function sinkOutbox(options: OutboxOptions): Outbox {
  const { runEvents } = proxySinks<RunEventSinks>();
  let seq = options.firstSeq;
  return {
    emit(type, ...[fields]) {
      seq += 1;
      runEvents.publish([envelope(options, seq, type, fields)]);
    },
    // Nothing waits in the workflow: what the task emitted is published before the task completes.
    flushed: async () => undefined,
    drain: async () => undefined,
    seq: () => seq,
    carry: (activities) => activities,
    carryWith: (send) => send(undefined) as never,
  };
}

/**
 * The outbox of new executions, and of those recorded before the sink: one loop publishes in seq order
 * by activity, each batch what completed tasks emitted. The loop cannot be cancelled, so a Temporal cancel never stops the run's last events going out;
 * publishing retries for as long as it takes, so an event the workflow decided on is never dropped.
 */
function activityOutbox(options: OutboxOptions): Outbox {
  const publisher = proxyActivities<PublishActivities>({ taskQueue: options.lane, startToCloseTimeout: '30s', retry: FOREVER });
  const queue: RunEventEnvelope[] = [];
  let seq = options.firstSeq;
  let closing = false;
  const publishing = CancellationScope.nonCancellable(async () => {
    for (;;) {
      await condition(() => queue.length > 0 || closing);
      if (queue.length === 0) return;
      const batch = nextBatch(queue);
      await publisher.publishRunEvents(batch);
      queue.splice(0, batch.length);
    }
  });
  return {
    emit(type, ...[fields]) {
      seq += 1;
      queue.push(envelope(options, seq, type, fields));
    },
    flushed: () => condition(() => queue.length === 0),
    async drain() {
      closing = true;
      await publishing;
    },
    seq: () => seq,
    carry: (activities) => activities,
    carryWith: (send) => send(undefined) as never,
  };
}

/**
 * The outbox of executions that publish by carrying (`events_via: 'carried'`). Events ride the
 * activities the run schedules anyway on the carrying lanes: a call takes every event not yet known
 * to be on the topic as its last argument, recorded in the history with the call, so only what a
 * completed workflow task emitted is ever published, and always the same events. The worker publishes
 * them while the activity runs and says so in the result; the outbox then knows them published. A
 * carrier its lane does not start promptly (a queued GPU lane, a stopped gpu-worker) would hold its
 * events back, so the workflow's worker watches each one (the `carrying`/`landed` sink calls) and
 * publishes a stalled carrier's events itself, read from the history.
 *
 * Events that no call in flight carries (the task scheduled nothing on a carrying lane: a wait, the
 * end), and an execution's first events, which a client waits for, go out
 * by the `publishRunEvents` activity (dispatched eagerly to the workflow's own worker), as in the activity
 * outbox, whose loop this is: it cannot be cancelled and retries for as long as it takes. A carried
 * call that fails, or whose worker could not publish, leaves its events unconfirmed, so the next
 * carrier or that loop sends them again: duplicates, never a loss. Every batch starts at the first
 * unconfirmed seq, so whichever goes out first, a run's events first appear on the topic in seq order.
 */
function carriedOutbox(options: OutboxOptions): Outbox {
  const publisher = proxyActivities<PublishActivities>({ taskQueue: options.lane, startToCloseTimeout: '30s', retry: FOREVER });
  const { runEvents: watch } = proxySinks<RunEventSinks>();
  const has = (id: string): boolean => (options.patches ? options.patches.has(id) : patched(id));
  const unconfirmed: RunEventEnvelope[] = [];
  let seq = options.firstSeq;
  let confirmed = options.firstSeq;
  // The last seq each carrier in flight holds, by carrier.
  const inFlight = new Map<number, number>();
  let carriers = 0;
  let closing = false;

  const covered = (): number => {
    let through = confirmed;
    for (const last of inFlight.values()) through = Math.max(through, last);
    return through;
  };
  const confirm = (through: number): void => {
    if (through <= confirmed) return;
    confirmed = Math.min(through, seq);
    while (unconfirmed.length > 0 && unconfirmed[0].seq <= confirmed) unconfirmed.shift();
  };
  /** A batch from the first unconfirmed event, counted in flight until `landed` is called. */
  const board = (): { events: RunEventEnvelope[]; landed: (through?: number) => void } | undefined => {
    if (unconfirmed.length === 0) return undefined;
    const events = nextBatch(unconfirmed);
    const id = carriers++;
    inFlight.set(id, events[events.length - 1].seq);
    return {
      events,
      landed: (through) => {
        inFlight.delete(id);
        if (through !== undefined) confirm(through);
      },
    };
  };

  const publishing = CancellationScope.nonCancellable(async () => {
    for (;;) {
      await condition(() => seq > covered() || (closing && confirmed === seq));
      // A call may have boarded the events between the condition and here: then wait again.
      if (seq <= covered()) {
        if (closing && confirmed === seq) return;
        continue;
      }
      const batch = board()!;
      try {
        await publisher.publishRunEvents(batch.events);
        batch.landed(batch.events[batch.events.length - 1].seq);
      } finally {
        batch.landed();
      }
    }
  });

  return {
    emit(type, ...[fields]) {
      seq += 1;
      unconfirmed.push(envelope(options, seq, type, fields));
    },
    flushed: () => condition(() => confirmed === seq),
    async drain() {
      closing = true;
      await publishing;
    },
    seq: () => seq,
    carry<T extends object>(activities: T, since?: string): T {
      if (since !== undefined && !has(since)) return activities;
      return new Proxy(activities, {
        get(target, name, receiver) {
          const property = Reflect.get(target, name, receiver) as unknown;
          if (typeof property !== 'function') return property;
          // A `proxyActivities` function: calling it schedules the activity and resolves with its result.
          const call = property as (...a: unknown[]) => Promise<unknown>;
          return (...args: unknown[]) => viaCarrier((carried) => (carried ? call(...args, carried) : call(...args)));
        },
      });
    },
    carryWith<R>(send: (carried: CarriedEvents | undefined) => Promise<R | CarriedResult>, since?: string): Promise<R> {
      if (since !== undefined && !has(since)) return send(undefined) as Promise<R>;
      return viaCarrier(send) as Promise<R>;
    },
  };

  /** `send` with a batch from the first unconfirmed event, when there is one to give; its result unwrapped. */
  function viaCarrier(send: (carried: CarriedEvents | undefined) => Promise<unknown>): Promise<unknown> {
    // An execution's first events go by the publishing activity, which its worker runs at once
    // (eager dispatch, its own queue); a call on another lane is matched and polled first, and
    // the first event is what a client waits for.
    const batch = confirmed > options.firstSeq ? board() : undefined;
    if (!batch) return send(undefined);
    const through = batch.events[batch.events.length - 1].seq;
    watch.carrying(through);
    return send({ [CARRIED_EVENTS_KEY]: batch.events }).then(
      (result) => {
        watch.landed(through);
        if (!isCarriedResult(result)) {
          batch.landed();
          return result;
        }
        batch.landed(result[CARRIED_RESULT_KEY]);
        return result.value;
      },
      (err: unknown) => {
        watch.landed(through);
        batch.landed();
        throw err;
      },
    );
  }
}
