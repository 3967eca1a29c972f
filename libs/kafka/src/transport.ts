import { BaseRpcContext, Server, type CustomTransportStrategy, type MessageHandler } from '@nestjs/microservices';
import { lastValueFrom } from 'rxjs';
import type { BatchContext, ConsumerHandle, InboundMessage, KafkaBus } from './bus';

/** Tells the handlers registered on a `KafkaBusTransport` apart from those of any other transport. */
export const KAFKA_BUS_TRANSPORT = Symbol('KafkaBusTransport');

/** The `extras` of an `@EventPattern` on this transport. */
export interface KafkaBusPatternExtras {
  /**
   * One handler call per fetched batch (the payload is `InboundMessage[]`) instead of one call per
   * message (the payload is one `InboundMessage`).
   */
  batch?: boolean;
}

export interface KafkaBusTransportOptions {
  /** The name its readiness check reports under. */
  name: string;
  bus: KafkaBus;
  /** The consumer group, exactly as it is to appear on the broker. */
  groupId: string;
  /** The topic an `@EventPattern` name is read from (e.g. with a test prefix); the name itself by default. */
  topic?: (pattern: string) => string;
  /** Partitions handled at once; each partition's messages stay in order. */
  concurrency?: number;
  fromBeginning?: boolean;
}

type KafkaBusContextArgs = [topic: string, partition: number, firstOffset: string, lastOffset: string, batch: BatchContext];

/**
 * What a handler on this transport gets beside its payload: where the messages came from, and the
 * fetched batch's own controls. Nothing is committed for the handler: it calls `commit` once its
 * outcome is recorded, so a crash before that reads the messages again.
 */
export class KafkaBusContext extends BaseRpcContext<KafkaBusContextArgs> implements BatchContext {
  getTopic(): string {
    return this.args[0];
  }

  getPartition(): number {
    return this.args[1];
  }

  /** The offset of the first message handed to this call. */
  getFirstOffset(): string {
    return this.args[2];
  }

  /** The offset of the last message handed to this call. */
  getLastOffset(): string {
    return this.args[3];
  }

  /** Commits everything up to and including `offset` (by default the last message handed to this call). */
  commit(offset: string = this.getLastOffset()): Promise<void> {
    return this.args[4].commit(offset);
  }

  heartbeat(): Promise<void> {
    return this.args[4].heartbeat();
  }

  /** False once the consumer is stopping or the partition was taken away: stop, and do not commit. */
  isActive(): boolean {
    return this.args[4].isActive();
  }
}

interface Route {
  pattern: string;
  handler: MessageHandler;
  batch: boolean;
}

/**
 * A Nest transport over `KafkaBus`: every `@EventPattern(topicName)` of the app becomes a topic of
 * one consumer group. Unlike Nest's built-in Kafka transport it keeps the payload as raw bytes (a
 * message that cannot be read still reaches a dead-letter topic intact), can hand a handler the
 * whole fetched batch, never commits on the handler's behalf, and awaits each handler before the
 * next message of the partition, so a stop lets the call in flight finish.
 */
export class KafkaBusTransport extends Server implements CustomTransportStrategy {
  override readonly transportId = KAFKA_BUS_TRANSPORT;
  readonly name: string;
  private consumer?: ConsumerHandle;
  private readonly routes = new Map<string, Route>();

  constructor(private readonly options: KafkaBusTransportOptions) {
    super();
    this.name = options.name;
  }

  async listen(callback: (err?: unknown) => void): Promise<void> {
    try {
      await this.start();
    } catch (err) {
      callback(err);
      return;
    }
    callback();
  }

  async close(): Promise<void> {
    const consumer = this.consumer;
    this.consumer = undefined;
    await consumer?.stop();
  }

  /** For `/readyz`: fails until the consumer has joined its group. */
  async check(): Promise<void> {
    if (!this.consumer?.isRunning()) throw new Error('not in the consumer group yet');
  }

  on(): never {
    throw new Error('KafkaBusTransport has no events to subscribe to');
  }

  unwrap<T>(): T {
    if (!this.consumer) throw new Error('KafkaBusTransport is not listening');
    return this.consumer as T;
  }

  private async start(): Promise<void> {
    const topicOf = this.options.topic ?? ((pattern: string) => pattern);
    for (const [pattern, handler] of this.getHandlers()) {
      if (!handler.isEventHandler) throw new Error(`${pattern}: only @EventPattern handlers can run on Kafka (nothing answers a request)`);
      const extras = (handler.extras ?? {}) as KafkaBusPatternExtras;
      this.routes.set(topicOf(pattern), { pattern, handler, batch: extras.batch === true });
    }
    if (this.routes.size === 0) throw new Error(`${this.name}: no @EventPattern handler to consume for`);
    this.consumer = await this.options.bus.consume({
      groupId: this.options.groupId,
      topics: [...this.routes.keys()],
      concurrency: this.options.concurrency,
      fromBeginning: this.options.fromBeginning,
      handle: (messages, batch) => this.dispatch(messages, batch),
    });
  }

  private async dispatch(messages: InboundMessage[], batch: BatchContext): Promise<void> {
    if (messages.length === 0 || !batch.isActive()) return;
    const { topic, partition } = messages[0];
    const route = this.routes.get(topic);
    if (!route) throw new Error(`a batch from ${topic}, which no handler consumes`);
    let committed = -1n;
    const tracked: BatchContext = {
      heartbeat: () => batch.heartbeat(),
      isActive: () => batch.isActive(),
      commit: async (offset) => {
        await batch.commit(offset);
        committed = BigInt(offset);
      },
    };
    if (route.batch) {
      await this.invoke(route, messages, new KafkaBusContext([topic, partition, messages[0].offset, messages[messages.length - 1].offset, tracked]));
      return;
    }
    for (const message of messages) {
      if (!batch.isActive()) return;
      await this.invoke(route, message, new KafkaBusContext([topic, partition, message.offset, message.offset, tracked]));
      // An uncommitted message was not decided (its handler gave up as the consumer stopped): the
      // rest of the batch waits behind it for the partition's next owner.
      if (committed < BigInt(message.offset)) return;
      await batch.heartbeat();
    }
  }

  /**
   * Calls the handler through Nest's pipeline (guards, interceptors, filters) and waits for all of
   * its work. A failure is thrown back to the consumer, which fetches the batch again.
   */
  private async invoke(route: Route, payload: InboundMessage | InboundMessage[], ctx: KafkaBusContext): Promise<void> {
    try {
      await lastValueFrom(this.transformToObservable(await route.handler(payload, ctx)), { defaultValue: undefined });
    } catch (err) {
      // Nest's exception filter has logged the original error and answers with a plain object.
      if (err instanceof Error) throw err;
      throw new Error(`${route.pattern} handler failed at ${ctx.getTopic()}/${ctx.getPartition()}@${ctx.getFirstOffset()}: ${JSON.stringify(err)}`);
    }
  }
}
