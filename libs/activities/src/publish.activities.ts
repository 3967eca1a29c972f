import { TOPICS, type RunEventEnvelope } from '@agentrun/contracts';
import { ApplicationFailure } from '@temporalio/common';
import { noFaults, type FaultPoints } from '@agentrun/config';
import type { KafkaBus } from '@agentrun/kafka';
import type { PublishActivities } from '@agentrun/workflows';

export interface PublishDeps {
  bus: KafkaBus;
  topicPrefix: string;
  /** `publish.lose_ack_every=N`: every Nth publish is sent, then reported failed, as if its ack was lost. */
  faults?: FaultPoints;
}

/**
 * The only producer of run events. Keyed by run id so a run's events stay in one partition, in the
 * order the workflow gave them. A retry after a lost ack may publish a batch twice; every consumer
 * dedupes by `(org, run_id, seq)`.
 */
export function createPublishActivities(deps: PublishDeps): PublishActivities {
  const topic = deps.topicPrefix + TOPICS.runEvents;
  return {
    async publishRunEvents(events: RunEventEnvelope[]) {
      await deps.bus.send(
        topic,
        events.map((e) => ({ key: e.run_id, value: JSON.stringify(e), headers: { org: e.org, seq: String(e.seq), type: e.type } })),
      );
      if ((deps.faults ?? noFaults).hit('publish.lose_ack_every')) {
        throw ApplicationFailure.retryable(`fault point: the ack of ${events.length} published events was lost`, 'LostAck');
      }
    },
  };
}
