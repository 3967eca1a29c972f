import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { TOPICS } from '@agentrun/contracts';
import { readCommand } from '@agentrun/contracts/validation';
import { CommandService, TransientCommandError } from '@agentrun/commands';
import { dlqMessage, retryWhileActive, type BatchContext, type ConsumerHandle, type InboundMessage } from '@agentrun/kafka';
import { Kafka, PLATFORM_CONFIG, type ReadinessCheck } from '@agentrun/runtime';
import type { OrchestratorConfig } from './config';

const GROUP = 'agentrun-orchestrator-commands';

/**
 * Turns outside commands into Temporal calls. A message's offset is committed only after its
 * outcome is decided (Temporal accepted, or the command was rejected or dead-lettered), so a crash
 * re-reads it and the ledger answers `duplicate` for what was already done.
 */
@Injectable()
export class CommandConsumer implements OnApplicationBootstrap, OnModuleDestroy, ReadinessCheck {
  readonly name = 'command-consumer';
  private readonly logger = new Logger(CommandConsumer.name);
  private consumer?: ConsumerHandle;

  constructor(
    private readonly kafka: Kafka,
    private readonly commands: CommandService,
    @Inject(PLATFORM_CONFIG) private readonly config: OrchestratorConfig,
  ) {}

  /** After every provider has started: the Temporal client and the ledger are ready before the first command. */
  async onApplicationBootstrap(): Promise<void> {
    this.consumer = await this.kafka.bus.consume({
      groupId: this.kafka.topic(GROUP),
      topics: [this.kafka.topic(TOPICS.commands)],
      concurrency: this.config.COMMAND_CONCURRENCY,
      handle: (messages, ctx) => this.handleBatch(messages, ctx),
    });
  }

  async check(): Promise<void> {
    if (!this.consumer?.isRunning()) throw new Error('not in the consumer group yet');
  }

  async onModuleDestroy(): Promise<void> {
    await this.consumer?.stop();
  }

  private async handleBatch(messages: InboundMessage[], ctx: BatchContext): Promise<void> {
    for (const message of messages) {
      if (!ctx.isActive()) return;
      const done = await this.handleMessage(message, ctx);
      if (!done) return; // stopping: leave the rest for whoever owns the partition next
      await ctx.commit(message.offset);
      await ctx.heartbeat();
    }
  }

  /** Returns false when it gave up because the consumer is stopping (nothing was decided). */
  private async handleMessage(message: InboundMessage, ctx: BatchContext): Promise<boolean> {
    const reading = readCommand(message.value);
    if (reading.kind === 'unreadable') {
      this.logger.warn(`dead-lettering ${message.topic}/${message.partition}@${message.offset}: ${reading.reason} (${reading.detail})`);
      await this.kafka.bus.send(this.kafka.topic(TOPICS.commandsDlq), [dlqMessage(message, reading.reason, reading.detail)]);
      return true;
    }
    const source = `${message.topic}/${message.partition}/${message.offset}`;
    const result = await retryWhileActive(
      ctx,
      () =>
        reading.kind === 'rejected'
          ? this.commands.reject(reading, reading.reason, reading.message, source)
          : this.commands.handle(reading.command, source),
      // Temporal, Postgres or Kafka out of reach: nothing was decided, so the same command is tried again.
      (err, attempt, delay) => {
        const what = err instanceof TransientCommandError ? err.message : ((err as Error).stack ?? String(err));
        this.logger.warn(`command at ${message.partition}@${message.offset} not decided (attempt ${attempt}), retrying in ${delay} ms: ${what}`);
      },
    );
    return result.done;
  }
}
