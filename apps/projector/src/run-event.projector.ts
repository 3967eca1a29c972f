import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { TOPICS, type RunEventEnvelope } from '@agentrun/contracts';
import { readRunEvent } from '@agentrun/contracts/validation';
import { dlqMessage, retryWhileActive, type BatchContext, type ConsumerHandle, type InboundMessage, type OutboundMessage } from '@agentrun/kafka';
import { FaultPoints } from '@agentrun/config';
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
export class RunEventProjector implements OnApplicationBootstrap, OnModuleDestroy, ReadinessCheck {
  readonly name = 'projector-consumer';
  private readonly logger = new Logger(RunEventProjector.name);
  private consumer?: ConsumerHandle;
  private readonly faults: FaultPoints;

  constructor(
    private readonly db: Database,
    private readonly kafka: Kafka,
    @Inject(PLATFORM_CONFIG) private readonly config: ProjectorConfig,
  ) {
    this.faults = new FaultPoints(config.AGENTRUN_FAULTS, config.AGENTRUN_PROFILE);
  }

  async onApplicationBootstrap(): Promise<void> {
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
    const events: RunEventEnvelope[] = [];
    const sources = new Map<RunEventEnvelope, InboundMessage>();
    const poison: OutboundMessage[] = [];
    for (const message of messages) {
      const reading = readRunEvent(message.value);
      if (reading.ok) {
        events.push(reading.event);
        sources.set(reading.event, message);
      } else poison.push(dlqMessage(message, 'not_an_event', reading.detail));
    }
    if (poison.length) {
      this.logger.warn(`dead-lettering ${poison.length} unreadable run events`);
      await this.kafka.bus.send(this.kafka.topic(TOPICS.runEventsDlq), poison);
    }
    const applied = await retryWhileActive(
      ctx,
      () => this.apply(events, sources),
      (err, attempt, delay) => this.logger.warn(`apply failed (attempt ${attempt}), retrying in ${delay} ms: ${(err as Error).message}`),
    );
    if (!applied.done) return; // uncommitted: whoever owns the partition next applies it
    if (this.faults.hit('projector.crash_after_apply')) {
      // The window the design must survive: Postgres has the batch, Kafka does not know it yet.
      this.logger.warn('fault point: dying between the Postgres commit and the offset commit');
      process.kill(process.pid, 'SIGKILL');
    }
    await ctx.commit(messages[messages.length - 1].offset);
  }

  /**
   * Applies the batch; if Postgres refuses the data itself (SQLSTATE class 22: a value it cannot
   * store), applies the events one by one and dead-letters only those it refuses, so one bad event
   * cannot stall the partition. Anything else (Postgres down) is thrown and retried.
   */
  private async apply(events: RunEventEnvelope[], sources: Map<RunEventEnvelope, InboundMessage>): Promise<void> {
    try {
      await applyRunEvents(this.db.dataSource, events);
      return;
    } catch (err) {
      if (!isDataException(err)) throw err;
    }
    for (const event of events) {
      try {
        await applyRunEvents(this.db.dataSource, [event]);
      } catch (err) {
        if (!isDataException(err)) throw err;
        this.logger.warn(`dead-lettering run event ${event.org}/${event.run_id}#${event.seq}: ${(err as Error).message}`);
        await this.kafka.bus.send(this.kafka.topic(TOPICS.runEventsDlq), [dlqMessage(sources.get(event)!, 'not_an_event', (err as Error).message)]);
      }
    }
  }
}

function isDataException(err: unknown): boolean {
  const code = (err as { code?: unknown; driverError?: { code?: unknown } }).driverError?.code ?? (err as { code?: unknown }).code;
  return typeof code === 'string' && code.startsWith('22');
}
