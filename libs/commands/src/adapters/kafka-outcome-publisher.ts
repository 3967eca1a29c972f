import type { CommandOutcome } from '@agentrun/contracts';
import type { KafkaBus } from '@agentrun/kafka';
import { traceHeaders } from '@agentrun/telemetry';
import type { OutcomePublisherPort } from '../ports';

/**
 * Outcome records on the command-results topic, keyed by run so a run's outcomes stay in order. Each
 * carries the trace it was decided in (`traceparent`: the command's, from Kafka or HTTP) when there is one.
 */
export class KafkaOutcomePublisher implements OutcomePublisherPort {
  constructor(
    private readonly bus: KafkaBus,
    private readonly topic: string,
  ) {}

  async publish(outcome: CommandOutcome): Promise<void> {
    const headers = traceHeaders();
    await this.bus.send(this.topic, [{ key: outcome.run_id, value: JSON.stringify(outcome), ...(headers.traceparent ? { headers } : {}) }]);
  }
}
