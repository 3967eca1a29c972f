import { CancellationScope, condition, proxyActivities } from '@temporalio/workflow';
import type { RunEventEnvelope, RunEventFieldsOf, RunEventType, RunKind, RunState } from '@agentrun/contracts';
import type { PublishActivities } from './agent-run.types';
import { FOREVER } from './retry-policies';

/** Events go out in batches of at most this many per publish activity. */
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
export type StatusEventType = 'status_changed' | 'run_started' | 'run_finished';

export interface Outbox {
  /** Assigns the next seq and queues the event; the run's state is attached to every event. */
  emit<T extends RunEventType>(type: T, ...fields: EmitFields<T>): void;
  /** Resolves once every event emitted so far is on the topic; the loop goes on. */
  flushed(): Promise<void>;
  /** Resolves once every event is on the topic and the loop has ended: only when the run is over. */
  drain(): Promise<void>;
  /** The last seq assigned. */
  seq(): number;
}

/**
 * The run's outbox: seq is assigned here and nowhere else, and one loop publishes in seq order.
 * The loop cannot be cancelled, so a Temporal cancel never stops the run's last events going out;
 * publishing retries for as long as it takes, so an event the workflow decided on is never dropped.
 */
export function openOutbox(options: { org: string; run_id: string; kind: RunKind; lane: string; firstSeq: number; state: () => RunState }): Outbox {
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
      queue.push({
        run_id: options.run_id,
        org: options.org,
        kind: options.kind,
        seq,
        type,
        ts: new Date().toISOString(),
        payload: { ...fields, state: options.state() },
      });
    },
    flushed: () => condition(() => queue.length === 0),
    async drain() {
      closing = true;
      await publishing;
    },
    seq: () => seq,
  };
}
