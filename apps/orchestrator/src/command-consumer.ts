import { Controller, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import { COMMAND_TYPES, TOPICS, type CommandOutcome } from '@agentrun/contracts';
import { readCommand, type CommandReading } from '@agentrun/contracts/validation';
import { CommandAuthenticator, CommandService, TransientCommandError } from '@agentrun/commands';
import { dlqMessage, retryWhileActive, undecodableDlqMessage, type InboundMessage, type KafkaBusContext } from '@agentrun/kafka';
import { Kafka } from '@agentrun/runtime';
import { BoundedLabel, inConsumerSpan, processMetrics, traceIdOfTraceparent, withLogContext } from '@agentrun/telemetry';

/** A command type as a metric label: one of the catalogue's, or `unknown`. */
const COMMAND_TYPE_LABEL = new BoundedLabel(0, COMMAND_TYPES, 'unknown');

/** Counts one decision as `agentrun_commands_total{type,outcome,reason}` (reason '' when none). */
export function countDecision(outcome: Pick<CommandOutcome, 'type' | 'outcome' | 'reason'>, metrics = processMetrics()): void {
  metrics.commands().inc({ type: COMMAND_TYPE_LABEL.of(outcome.type), outcome: outcome.outcome, reason: outcome.reason ?? '' });
}

/** The consumer group that decides commands; the test prefix is added in front of it. */
export const COMMAND_GROUP = 'agentrun-orchestrator-commands';

/**
 * Turns outside commands into Temporal calls, one message at a time per partition. A message's
 * offset is committed only after its outcome is decided (Temporal accepted, or the command was
 * rejected or dead-lettered), so a crash re-reads it and the ledger answers `duplicate` for what
 * was already done.
 *
 * In production mode a command counts only when signed with a command key of the org it names
 * (CommandAuthenticator); that is checked before the ledger, the run or its validity is looked at.
 */
@Controller()
export class CommandConsumer implements OnApplicationBootstrap {
  private readonly logger = new Logger(CommandConsumer.name);
  private readonly metrics = processMetrics();

  constructor(
    private readonly kafka: Kafka,
    private readonly commands: CommandService,
    private readonly auth: CommandAuthenticator,
  ) {
    this.metrics.commands();
    this.metrics.dlq();
    kafka.exportConsumerLag(kafka.groupId(COMMAND_GROUP), [TOPICS.commands]);
  }

  onApplicationBootstrap(): void {
    const { level, message } = this.auth.describe();
    this.logger[level](message);
  }

  @EventPattern(TOPICS.commands)
  async decide(@Payload() message: InboundMessage, @Ctx() ctx: KafkaBusContext): Promise<void> {
    // A command's `traceparent` starts or continues its trace: the workflow start, and through it the
    // run's activities and events, are children of this span.
    await inConsumerSpan(message, this.kafka.groupId(COMMAND_GROUP), async () => {
      // Not decided means the consumer is stopping: the uncommitted message is read again by the partition's next owner.
      if (await this.decideMessage(message, ctx)) await ctx.commit();
    });
  }

  /** Returns false when it gave up because the consumer is stopping (nothing was decided). */
  private async decideMessage(message: InboundMessage, ctx: KafkaBusContext): Promise<boolean> {
    if (message.undecodable) {
      // A batch the client could not read: dead-lettered whole, and the commit moves past all of it.
      const { baseOffset, lastOffset, reason } = message.undecodable;
      this.logger.warn(`dead-lettering the record batch ${message.topic}/${message.partition}@${baseOffset}..${lastOffset}: undecodable_batch (${reason})`);
      const dlq = this.kafka.topic(TOPICS.commandsDlq);
      await this.kafka.bus.send(dlq, [undecodableDlqMessage(message)]);
      this.metrics.dlq().inc({ topic: dlq, reason: 'undecodable_batch' });
      return true;
    }
    const reading = readCommand(message.value);
    if (reading.kind === 'unreadable') {
      this.logger.warn(`dead-lettering ${message.topic}/${message.partition}@${message.offset}: ${reading.reason} (${reading.detail})`);
      const dlq = this.kafka.topic(TOPICS.commandsDlq);
      await this.kafka.bus.send(dlq, [dlqMessage(message, reading.reason, reading.detail)]);
      this.metrics.dlq().inc({ topic: dlq, reason: reading.reason });
      return true;
    }
    const base = reading.kind === 'rejected' ? reading : reading.command;
    // Every line from here on (the handlers' and adapters' too) names the run and the command.
    const traceparent = message.headers?.traceparent;
    const context = { org: base.org, run_id: base.run_id, command_id: base.command_id, trace_id: traceIdOfTraceparent(Array.isArray(traceparent) ? traceparent[0] : traceparent) };
    return withLogContext(context, () => this.decideReadable(message, ctx, reading));
  }

  private async decideReadable(message: InboundMessage, ctx: KafkaBusContext, reading: Exclude<CommandReading, { kind: 'unreadable' }>): Promise<boolean> {
    const source = `${message.topic}/${message.partition}/${message.offset}`;
    const base = reading.kind === 'rejected' ? reading : reading.command;
    const what = `command ${base.command_id} (${base.type || 'no type'}) at ${message.partition}@${message.offset}`;
    const result = await retryWhileActive(
      ctx,
      async () => {
        // Reading the bytes touched nothing; this check comes before anything that does. Bytes that are
        // not a command at all went to the DLQ above, signed or not: there is no org to answer.
        const verdict = await this.auth.verify(message.value ?? Buffer.alloc(0), message.headers ?? {}, base.org);
        if (!verdict.ok) {
          this.logger.warn(`refused command ${base.command_id} (${base.type || 'no type'} for ${base.org}) at ${message.partition}@${message.offset} as unauthorized: ${verdict.why}`);
          return this.commands.refuseUnauthorized(base);
        }
        return reading.kind === 'rejected' ? this.commands.reject(reading, reading.reason, reading.message, source) : this.commands.handle(reading.command, source);
      },
      // Temporal, Postgres or Kafka out of reach: nothing was decided, so the same command is tried again.
      (err, attempt, delay) => {
        const why = err instanceof TransientCommandError ? err.message : ((err as Error).stack ?? String(err));
        this.logger.warn(`${what} not decided (attempt ${attempt}), retrying in ${delay} ms: ${why}`);
      },
    );
    if (result.done) {
      countDecision(result.value);
      this.logger.log(`${what}: ${result.value.outcome}${result.value.reason ? ` (${result.value.reason})` : ''}`);
    }
    return result.done;
  }
}
