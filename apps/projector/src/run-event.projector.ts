import { Inject, Injectable, Logger, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { TOPICS, type RunEvent } from '@agentrun/contracts';
import { readRunEvent } from '@agentrun/contracts/validation';
import { dlqMessage, retryWhileActive, type BatchContext, type ConsumerHandle, type InboundMessage, type OutboundMessage } from '@agentrun/kafka';
import { applyRunEvents } from '@agentrun/persistence';
import { Database, Kafka, PLATFORM_CONFIG, type ReadinessCheck } from '@agentrun/runtime';
import type { ProjectorConfig } from './config';

const GROUP = 'agentrun-projector';

/**
 * Builds the read model from the run-event topic. A fetched batch is applied in one Postgres
 * transaction (one NOTIFY), then its offsets are committed: a crash in between replays the batch,
 * which the `(org, run_id, seq)` key turns into a no-op.
 */
@Injectable()
export class RunEventProjector implements OnModuleInit, OnModuleDestroy, ReadinessCheck {
  readonly name = 'projector-consumer';
  private readonly logger = new Logger(RunEventProjector.name);
  private consumer?: ConsumerHandle;

  constructor(
    private readonly db: Database,
    private readonly kafka: Kafka,
    @Inject(PLATFORM_CONFIG) private readonly config: ProjectorConfig,
  ) {}

  async onModuleInit(): Promise<void> {
    this.consumer = await this.kafka.bus.consume({
      groupId: this.kafka.topic(GROUP),
      topics: [this.kafka.topic(TOPICS.runEvents)],
      concurrency: this.config.PROJECTOR_CONCURRENCY,
      handle: (messages, ctx) => this.applyBatch(messages, ctx),
    });
  }

  async check(): Promise<void> {
    if (!this.consumer?.isRunning()) throw new Error('not in the consumer group yet');
  }

  async onModuleDestroy(): Promise<void> {
    await this.consumer?.stop();
  }

  private async applyBatch(messages: InboundMessage[], ctx: BatchContext): Promise<void> {
    if (messages.length === 0 || !ctx.isActive()) return;
    const events: RunEvent[] = [];
    const poison: OutboundMessage[] = [];
    for (const message of messages) {
      const reading = readRunEvent(message.value);
      if (reading.ok) events.push(reading.event);
      else poison.push(dlqMessage(message, 'not_an_event', reading.detail));
    }
    if (poison.length) {
      this.logger.warn(`dead-lettering ${poison.length} unreadable run events`);
      await this.kafka.bus.send(this.kafka.topic(TOPICS.runEventsDlq), poison);
    }
    const applied = await retryWhileActive(
      ctx,
      () => applyRunEvents(this.db.dataSource, events),
      (err, attempt, delay) => this.logger.warn(`apply failed (attempt ${attempt}), retrying in ${delay} ms: ${(err as Error).message}`),
    );
    if (!applied.done) return; // uncommitted: whoever owns the partition next applies it
    await ctx.commit(messages[messages.length - 1].offset);
  }
}
