import { Controller, Inject, Logger } from '@nestjs/common';
import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import { runStateKey, TOPICS, type RunEventEnvelope } from '@agentrun/contracts';
import { readRunEvent } from '@agentrun/contracts/validation';
import { dlqMessage, retryWhileActive, undecodableDlqMessage, type EventVerifier, type InboundMessage, type KafkaBusContext, type KafkaBusPatternExtras, type OutboundMessage } from '@agentrun/kafka';
import { FaultPoints } from '@agentrun/config';
import { activeRunsByKindAndStatus, applyRunEvents, readRunStates } from '@agentrun/persistence';
import { Database, Kafka, PLATFORM_CONFIG, runEventVerifier } from '@agentrun/runtime';
import { contextOfTraceparent, inSpan, kafkaConsumeAttributes, linkTo, processMetrics, traceIdOfTraceparent, TRACEPARENT_HEADER, withLogContext, type LogContext } from '@agentrun/telemetry';
import { ROOT_CONTEXT, SpanKind, type Link } from '@opentelemetry/api';
import type { ProjectorConfig } from './config';

/** The consumer group that builds the read model; the test prefix is added in front of it. */
export const PROJECTOR_GROUP = 'agentrun-projector';

const WHOLE_BATCH: KafkaBusPatternExtras = { batch: true };

/**
 * Builds the read model from the run-event topic. Each record's signature is checked before its
 * bytes are parsed: an unsigned or badly signed record is dead-lettered with the reason and nothing
 * of it is stored. A fetched batch is applied in one Postgres transaction (one NOTIFY); then the
 * state of every run in it is published to the compacted run-state topic; then its offsets are
 * committed. A crash in between replays the batch, which the `(org, run_id, seq)` key turns into a
 * no-op, and publishes the same states again.
 */
@Controller()
export class RunEventProjector {
  private readonly logger = new Logger(RunEventProjector.name);
  private readonly faults: FaultPoints;
  private readonly verifier: EventVerifier;
  private readonly metrics = processMetrics();
  private readonly group: string;

  constructor(
    private readonly db: Database,
    private readonly kafka: Kafka,
    @Inject(PLATFORM_CONFIG) config: ProjectorConfig,
  ) {
    this.faults = new FaultPoints(config.AGENTRUN_FAULTS, config.AGENTRUN_PROFILE);
    this.verifier = runEventVerifier(config);
    this.metrics.projectorEvents();
    this.metrics.projectorBatchDuration();
    this.metrics.dlq();
    kafka.exportConsumerLag(kafka.groupId(PROJECTOR_GROUP), [TOPICS.runEvents]);
    // The projector is the one process that exports the read model's active runs (one grouped query per scrape).
    this.metrics.runsActive(() => activeRunsByKindAndStatus(db.dataSource));
    this.group = kafka.groupId(PROJECTOR_GROUP);
  }

  @EventPattern(TOPICS.runEvents, WHOLE_BATCH)
  async applyBatch(@Payload() messages: InboundMessage[], @Ctx() ctx: KafkaBusContext): Promise<void> {
    // One span per batch, linked to each event's trace; a batch of one trace (one run's events, the usual
    // case) is also its child, one that mixes traces starts a trace of its own.
    const traceparents = messages.map((m) => single(m.headers?.[TRACEPARENT_HEADER]));
    const links = traceparents.map((tp, i) => linkTo(tp, { 'messaging.kafka.offset': Number(messages[i].offset) })).filter((l): l is Link => l !== undefined);
    const traces = new Set(links.map((l) => l.context.traceId));
    const parent = traces.size === 1 && links.length === messages.length ? contextOfTraceparent(traceparents[0]) : ROOT_CONTEXT;
    const first = messages[0];
    const attributes = first ? { ...kafkaConsumeAttributes(first, this.group), 'messaging.batch.message_count': messages.length } : {};
    await inSpan(`process ${first?.topic ?? TOPICS.runEvents}`, { kind: SpanKind.CONSUMER, parent, links, attributes }, () => this.applyMessages(messages, ctx));
  }

  private async applyMessages(messages: InboundMessage[], ctx: KafkaBusContext): Promise<void> {
    const endTimer = this.metrics.projectorBatchDuration().startTimer();
    const events: RunEventEnvelope[] = [];
    const sources = new Map<RunEventEnvelope, InboundMessage>();
    const poison: OutboundMessage[] = [];
    const refused = new Map<string, number>();
    for (const message of messages) {
      if (message.undecodable) {
        // A record batch the client could not read: dead-lettered whole, each on its own send (one keeps up
        // to 256 KiB of the batch: several in one request could pass the DLQ's message size); the
        // batch's commit moves past it.
        const { baseOffset, lastOffset, reason } = message.undecodable;
        this.logger.warn(`dead-lettering the record batch ${message.partition}@${baseOffset}..${lastOffset}: undecodable_batch (${reason})`);
        const dlq = this.kafka.topic(TOPICS.runEventsDlq);
        await this.kafka.bus.send(dlq, [undecodableDlqMessage(message)]);
        this.metrics.dlq().inc({ topic: dlq, reason: 'undecodable_batch' });
        continue;
      }
      // Verified first: a forged record's bytes are never parsed, let alone stored.
      const verdict = this.verifier.verify(message.value, message.headers);
      if (!verdict.ok) {
        poison.push(dlqMessage(message, verdict.reason, verdict.detail));
        refused.set(verdict.reason, (refused.get(verdict.reason) ?? 0) + 1);
        continue;
      }
      const reading = readRunEvent(message.value);
      if (reading.ok) {
        events.push(reading.event);
        sources.set(reading.event, message);
      } else poison.push(dlqMessage(message, 'not_an_event', reading.detail));
    }
    if (poison.length) {
      const why = [...refused].map(([reason, n]) => `${n} ${reason}`).join(', ');
      this.logger.warn(`dead-lettering ${poison.length} run events${why ? ` (${why}; the rest unreadable)` : ' (unreadable)'}`);
      await this.kafka.bus.send(this.kafka.topic(TOPICS.runEventsDlq), poison);
      this.countDeadLetters(poison.length, refused);
    }
    // Both steps in one attempt: after a failed publish, applying again is a no-op and the states are read afresh.
    let stored = 0;
    const applied = await retryWhileActive(
      ctx,
      async () => {
        // Summed over attempts: an attempt after a failed publish stores nothing again.
        stored += await this.apply(events, sources);
        await this.publishRunStates(events);
      },
      (err, attempt, delay) => this.logger.warn(`apply or run-state publish failed (attempt ${attempt}), retrying in ${delay} ms: ${(err as Error).message}`),
    );
    if (!applied.done) return; // uncommitted: whoever owns the partition next applies it
    this.logProjected(events, sources);
    if (this.faults.hit('projector.crash_after_apply')) {
      // The window the design must survive: Postgres has the batch, Kafka does not know it yet.
      this.logger.warn('fault point: dying between the Postgres commit and the offset commit');
      process.kill(process.pid, 'SIGKILL');
    }
    await ctx.commit();
    this.metrics.projectorEvents().inc(stored);
    endTimer();
  }

  /** `refused` counts the signature refusals by reason; the rest of `total` were unreadable. */
  private countDeadLetters(total: number, refused: Map<string, number>): void {
    const topic = this.kafka.topic(TOPICS.runEventsDlq);
    let rest = total;
    for (const [reason, n] of refused) {
      this.metrics.dlq().inc({ topic, reason }, n);
      rest -= n;
    }
    if (rest > 0) this.metrics.dlq().inc({ topic, reason: 'not_an_event' }, rest);
  }

  /**
   * Applies the batch; if Postgres refuses the data itself (SQLSTATE class 22: a value it cannot
   * store), applies the events one by one and dead-letters only those it refuses, so one bad event
   * cannot stall the partition. Anything else (Postgres down) is thrown and retried.
   */
  private async apply(events: RunEventEnvelope[], sources: Map<RunEventEnvelope, InboundMessage>): Promise<number> {
    // Stored with each event, so its SSE frame (read from Postgres, not Kafka) joins its trace.
    const traceparents = new Map<RunEventEnvelope, string>();
    for (const [event, message] of sources) {
      const traceparent = single(message.headers?.[TRACEPARENT_HEADER]);
      if (traceparent && linkTo(traceparent)) traceparents.set(event, traceparent);
    }
    try {
      return (await applyRunEvents(this.db.dataSource, events, traceparents)).inserted;
    } catch (err) {
      if (!isDataException(err)) throw err;
    }
    let stored = 0;
    for (const event of events) {
      try {
        stored += (await applyRunEvents(this.db.dataSource, [event], traceparents)).inserted;
      } catch (err) {
        if (!isDataException(err)) throw err;
        withLogContext(eventLogContext(event, sources.get(event)), () => this.logger.warn(`dead-lettering run event ${event.org}/${event.run_id}#${event.seq}: ${(err as Error).message}`));
        const dlq = this.kafka.topic(TOPICS.runEventsDlq);
        await this.kafka.bus.send(dlq, [dlqMessage(sources.get(event)!, 'not_an_event', (err as Error).message)]);
        this.metrics.dlq().inc({ topic: dlq, reason: 'not_an_event' });
      }
    }
    return stored;
  }

  /**
   * Says, in each run's log context, that its start and its end were stored (info), and which seqs of
   * it the batch carried (debug): every other line of the batch is about many runs at once.
   */
  private logProjected(events: RunEventEnvelope[], sources: Map<RunEventEnvelope, InboundMessage>): void {
    const byRun = new Map<string, RunEventEnvelope[]>();
    for (const event of events) {
      const key = `${event.org}/${event.run_id}`;
      byRun.set(key, [...(byRun.get(key) ?? []), event]);
      if (event.type === 'run_started' || event.type === 'run_finished') {
        const status = event.payload.state?.status;
        withLogContext(eventLogContext(event, sources.get(event)), () => this.logger.log(`stored ${event.type} of ${event.kind} run (seq ${event.seq}${status ? `, ${status}` : ''})`));
      }
    }
    for (const runEvents of byRun.values()) {
      const seqs = runEvents.map((e) => e.seq);
      withLogContext(eventLogContext(runEvents[runEvents.length - 1], sources.get(runEvents[runEvents.length - 1])), () =>
        this.logger.debug(`stored ${runEvents.length} events (seq ${Math.min(...seqs)}..${Math.max(...seqs)})`),
      );
    }
  }

  /**
   * One record per run of the batch, keyed `{org}/{run_id}`, with its committed state. Replayed
   * runs are published too: the read model never moves back, so neither does the topic's last
   * record for a key.
   */
  private async publishRunStates(events: RunEventEnvelope[]): Promise<void> {
    const runs = new Map<string, { org: string; run_id: string }>();
    for (const { org, run_id } of events) runs.set(`${org}/${run_id}`, { org, run_id });
    const states = await readRunStates(this.db.dataSource, [...runs.values()]);
    await this.kafka.bus.send(
      this.kafka.topic(TOPICS.runState),
      states.map((state) => ({ key: runStateKey(state.org, state.run_id), value: JSON.stringify(state) })),
    );
  }
}

/** A header's one value; a header sent twice names no trace. */
function single(value: string | string[] | undefined): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/** The run an event belongs to, and its trace (from the record's `traceparent` header), for log lines. */
function eventLogContext(event: RunEventEnvelope, message: InboundMessage | undefined): LogContext {
  const traceparent = message?.headers?.traceparent;
  return { org: event.org, run_id: event.run_id, trace_id: traceIdOfTraceparent(Array.isArray(traceparent) ? traceparent[0] : traceparent) };
}

function isDataException(err: unknown): boolean {
  const code = (err as { code?: unknown; driverError?: { code?: unknown } }).driverError?.code ?? (err as { code?: unknown }).code;
  return typeof code === 'string' && code.startsWith('22');
}
