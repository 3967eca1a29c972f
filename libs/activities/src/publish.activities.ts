import { TOPICS, type RunEventEnvelope } from '@agentrun/contracts';
import { ApplicationFailure } from '@temporalio/common';
import { noFaults, type FaultPoints } from '@agentrun/config';
import type { EventSigner, KafkaBus } from '@agentrun/kafka';
import type { PublishActivities } from '@agentrun/workflows';
import { SpanKind } from '@opentelemetry/api';
import { inSpan, traceHeaders } from '@agentrun/telemetry';

export interface PublishDeps {
  bus: KafkaBus;
  topicPrefix: string;
  /** Signs each record's value bytes; the projector refuses run events without a valid signature. */
  signer: EventSigner;
  /** `publish.lose_ack_every=N`: every Nth publish is sent, then reported failed, as if its ack was lost. */
  faults?: FaultPoints;
}

/**
 * The only producer of run events. Keyed by run id so a run's events stay in one partition, in the
 * order the workflow gave them. A retry after a lost ack may publish a batch twice; every consumer
 * dedupes by `(org, run_id, seq)`. Each record is signed over the exact value bytes sent, so the
 * projector can tell our events from anything else written to the topic. Each record carries the
 * run's trace context (`traceparent`, W3C) when the activity runs in one.
 */
export function createPublishActivities(deps: PublishDeps): PublishActivities {
  const topic = deps.topicPrefix + TOPICS.runEvents;
  return {
    async publishRunEvents(events: RunEventEnvelope[]) {
      // A producer span in the trace the workflow runs in (the activity's span, whose parent came in the
      // activity's headers): every event carries it as `traceparent`. The signature covers the value
      // only, so headers can be added.
      await inSpan(
        `send ${topic}`,
        { kind: SpanKind.PRODUCER, attributes: { 'messaging.system': 'kafka', 'messaging.operation.type': 'send', 'messaging.destination.name': topic, 'messaging.batch.message_count': events.length } },
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
    },
  };
}
