import { TOPICS, type RunEvent } from '@agentrun/contracts';
import type { KafkaBus } from '@agentrun/kafka';
import type { PublishActivities } from '@agentrun/workflows';

export interface PublishDeps {
  bus: KafkaBus;
  topicPrefix: string;
}

/**
 * The only producer of run events. Keyed by run id so a run's events stay in one partition, in the
 * order the workflow gave them. A retry after a lost ack may publish a batch twice; every consumer
 * dedupes by `(org, run_id, seq)`.
 */
export function createPublishActivities(deps: PublishDeps): PublishActivities {
  const topic = deps.topicPrefix + TOPICS.runEvents;
  return {
    async publishRunEvents(events: RunEvent[]) {
      await deps.bus.send(
        topic,
        events.map((e) => ({ key: e.run_id, value: JSON.stringify(e), headers: { org: e.org, seq: String(e.seq), type: e.type } })),
      );
    },
  };
}
