import { TOPICS, type RunEventEnvelope } from '@agentrun/contracts';
import { ApplicationFailure } from '@temporalio/common';
import { noFaults, type FaultPoints } from '@agentrun/config';
import { PRODUCE_REQUEST_BYTES, type EventSigner, type KafkaBus } from '@agentrun/kafka';
import { CARRIED_EVENTS_KEY, CARRIED_RESULT_KEY, isCarriedEvents, TRACEPARENT_MEMO, type CarriedResult, type PublishActivities } from '@agentrun/workflows';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import { SpanKind, type Context } from '@opentelemetry/api';
import { contextOfTraceparent, inSpan, processMetrics, traceHeaders } from '@agentrun/telemetry';

export interface PublishDeps {
  bus: KafkaBus;
  topicPrefix: string;
  /** Signs each record's value bytes; the projector refuses run events without a valid signature. */
  signer: EventSigner;
  /** `publish.lose_ack_every=N`: every Nth publish is sent, then reported failed, as if its ack was lost. */
  faults?: FaultPoints;
}

/**
 * Sends one run's events, signed, in one request: keyed by run id so a run's events stay in one
 * partition, in the order the workflow gave them. Each record is signed over the exact value bytes
 * sent, so the projector can tell our events from anything else written to the topic, and carries the
 * trace context (`traceparent`, W3C) of a producer span under `parent` (the active context by default).
 */
export async function sendRunEvents(deps: PublishDeps, events: RunEventEnvelope[], parent?: Context): Promise<void> {
  const topic = deps.topicPrefix + TOPICS.runEvents;
  // The signature covers the value only, so headers can be added.
  await inSpan(
    `send ${topic}`,
    { kind: SpanKind.PRODUCER, ...(parent ? { parent } : {}), attributes: { 'messaging.system': 'kafka', 'messaging.operation.type': 'send', 'messaging.destination.name': topic, 'messaging.batch.message_count': events.length } },
    async () => {
      const trace = traceHeaders();
      await deps.bus.send(
        topic,
        events.map((e) => {
          const value = JSON.stringify(e);
          return { key: e.run_id, value, headers: { org: e.org, seq: String(e.seq), type: e.type, ...trace, ...deps.signer.headers(value) } };
        }),
      );
    },
  );
  if ((deps.faults ?? noFaults).hit('publish.lose_ack_every')) {
    throw ApplicationFailure.retryable(`fault point: the ack of ${events.length} published events was lost`, 'LostAck');
  }
}

/**
 * The publishing activity: how new executions' events leave (and those recorded before the sink's, see
 * `RunEventPublisher`). Its input is in the history, so a batch is only ever what a completed workflow
 * task emitted. A retry after a lost ack may publish a batch twice, the same events; every consumer
 * dedupes by `(org, run_id, seq)`.
 */
export function createPublishActivities(deps: PublishDeps): PublishActivities {
  return {
    // A producer span in the trace the workflow runs in (the activity's span, whose parent came in the activity's headers).
    async publishRunEvents(events: RunEventEnvelope[]) {
      const counted = processMetrics().runEventPublishing();
      try {
        await sendRunEvents(deps, events);
      } catch (err) {
        // Temporal retries the activity; the workflow's next batches wait behind this one.
        counted.failures.inc();
        throw err;
      }
      counted.published.inc(events.length);
    },
  };
}

/**
 * The activity interceptor of the lanes whose calls carry run events (the orchestrator's `cpu-tools`,
 * the GPU worker's `gpu-tools`; see the workflows' carried outbox). A call whose last argument holds
 * events publishes them, signed, while the activity runs (the events were decided before the call, so
 * nothing orders them after it; a GPU slot is not held for the send), and then answers
 * `{ [CARRIED_RESULT_KEY]: last seq, value }` with the activity's own result as `value`, which the
 * workflow unwraps. When they cannot be published (Kafka away, a lost ack) the activity still answers
 * plainly: the workflow then sends those events again with its next carrier or its publishing
 * activity, so a Kafka outage never fails a tool. Calls without events pass through untouched.
 */
export function carriedEventsInterceptor(deps: PublishDeps, log?: (message: string) => void): ActivityInterceptorsFactory {
  return (ctx) => ({
    inbound: {
      async execute(input, next) {
        const carried = input.args[input.args.length - 1];
        if (input.args.length < 2 || !isCarriedEvents(carried)) return next(input);
        const events = carried[CARRIED_EVENTS_KEY];
        // Never rejects: the seq the events are published through, or undefined.
        const publishing = (async (): Promise<number | undefined> => {
          if (events.length === 0) return undefined;
          const counted = processMetrics().runEventPublishing();
          try {
            await sendRunEvents(deps, events);
            counted.published.inc(events.length);
            return events[events.length - 1].seq;
          } catch (err) {
            counted.failures.inc();
            log?.(`run events carried by ${ctx.info.activityType} not acknowledged; the workflow sends them again: ${err instanceof Error ? err.message : String(err)}`);
            return undefined;
          }
        })();
        let value: unknown;
        try {
          value = await next({ ...input, args: input.args.slice(0, -1) });
        } finally {
          // Settled before the activity answers, whichever way: the workflow learns of the events only from the result.
          await publishing;
        }
        const through = await publishing;
        return through === undefined ? value : ({ [CARRIED_RESULT_KEY]: through, value } satisfies CarriedResult);
      },
    },
  });
}

/** The events in consecutive groups of at most `PRODUCE_REQUEST_BYTES` of JSON (a larger event goes alone). */
export function requestsOf(events: RunEventEnvelope[], maxBytes = PRODUCE_REQUEST_BYTES): RunEventEnvelope[][] {
  const out: RunEventEnvelope[][] = [];
  let current: RunEventEnvelope[] = [];
  let bytes = 0;
  for (const e of events) {
    const size = Buffer.byteLength(JSON.stringify(e));
    if (current.length > 0 && bytes + size > maxBytes) {
      out.push(current);
      current = [];
      bytes = 0;
    }
    current.push(e);
    bytes += size;
  }
  if (current.length > 0) out.push(current);
  return out;
}

/** What the sink is told of the workflow execution that emitted the events (a subset of the SDK's WorkflowInfo). */
export interface EmittingWorkflow {
  workflowId: string;
  runId: string;
  memo?: Record<string, unknown>;
}

export interface PublisherOptions {
  /** The first wait after a failed attempt, doubled up to `maxBackoffMs`. */
  backoffMs?: number;
  maxBackoffMs?: number;
  /** Told of each failed attempt (the caller logs it). */
  onFailure?: (workflow: EmittingWorkflow, attempt: number, err: unknown) => void;
}

/**
 * The workflow worker's sink for run events (`RunEventSinks` in the workflows lib). The SDK calls it
 * once per event a workflow task emitted, after the task's code ran and before the task is reported
 * complete, and awaits what it returns. The calls of one task (made one after another, in the same
 * turn) go out as one request, and the promise resolves only once Kafka has acknowledged it: failed
 * attempts are retried with backoff for as long as it takes, holding the task. One run's tasks run one
 * at a time, so its events reach the topic in seq order. A task cut off after this published (held
 * past its timeout, its worker killed) runs again with what arrived meanwhile and may emit other events
 * under the same seqs: so only executions recorded with the sink's patch, and runs started with
 * AGENTRUN_RUN_EVENTS_VIA=workflow-task, publish through it (see `RunEventSinks`).
 */
export class RunEventPublisher {
  private readonly open = new Map<string, { workflow: EmittingWorkflow; events: RunEventEnvelope[]; acked: Promise<void> }>();
  private readonly metrics = processMetrics().runEventPublishing();

  constructor(
    private readonly deps: PublishDeps,
    private readonly options: PublisherOptions = {},
  ) {}

  publish(workflow: EmittingWorkflow, events: RunEventEnvelope[]): Promise<void> {
    let batch = this.open.get(workflow.runId);
    if (!batch) {
      const opened = { workflow, events: [] as RunEventEnvelope[], acked: Promise.resolve() };
      // A microtask later: every call of the same task has joined by then.
      opened.acked = Promise.resolve().then(() => {
        this.open.delete(workflow.runId);
        return this.untilAcked(opened.workflow, opened.events);
      });
      this.open.set(workflow.runId, opened);
      batch = opened;
    }
    batch.events.push(...events);
    return batch.acked;
  }

  private async untilAcked(workflow: EmittingWorkflow, events: RunEventEnvelope[]): Promise<void> {
    const traceparent = workflow.memo?.[TRACEPARENT_MEMO];
    const parent = typeof traceparent === 'string' ? contextOfTraceparent(traceparent) : undefined;
    // In order, one request after another: a run's records form one batch per request on its
    // partition, which must stay under the topic's max.message.bytes (an eval's events each carry
    // every case's view, so a task's few can be large).
    for (const part of requestsOf(events)) await this.sendUntilAcked(workflow, part, parent);
  }

  private async sendUntilAcked(workflow: EmittingWorkflow, events: RunEventEnvelope[], parent: Context | undefined): Promise<void> {
    let wait = this.options.backoffMs ?? 100;
    for (let attempt = 1; ; attempt += 1) {
      try {
        await sendRunEvents(this.deps, events, parent);
        this.metrics.published.inc(events.length);
        return;
      } catch (err) {
        this.metrics.failures.inc();
        this.options.onFailure?.(workflow, attempt, err);
        await new Promise((resolve) => setTimeout(resolve, wait));
        wait = Math.min(wait * 2, this.options.maxBackoffMs ?? 5_000);
      }
    }
  }
}
