import { Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { TOPICS, type RunTokenDelta } from '@agentrun/contracts';
import { readRunTokenDelta } from '@agentrun/contracts/validation';
import type { ConsumerHandle, InboundMessage } from '@agentrun/kafka';
import { Kafka, type ReadinessCheck } from '@agentrun/runtime';
import { processMetrics } from '@agentrun/telemetry';

/** The consumer groups' prefix: each gateway process reads every delta in a group of its own. */
export const TOKEN_GROUP_PREFIX = 'agentrun-gateway-tokens';

export type TokenListener = (delta: RunTokenDelta) => void;

/**
 * Model reply deltas (`agentrun.run-tokens.v1`) for the SSE streams of this gateway. Every gateway
 * process reads all of them, from the newest, in a consumer group of its own that commits nothing (a
 * restart starts again from the newest: deltas are live only). Each is handed to the streams open on
 * its org's run; one that cannot be read is counted and skipped, never stored or passed on.
 */
@Injectable()
export class LiveTokensHub implements OnModuleInit, OnApplicationShutdown, ReadinessCheck {
  readonly name = 'live-tokens';
  private readonly logger = new Logger(LiveTokensHub.name);
  private readonly listeners = new Map<string, Set<TokenListener>>();
  private readonly unreadable = processMetrics().runTokensUnreadable();
  private consumer?: ConsumerHandle;
  private lastWarned = 0;

  constructor(private readonly kafka: Kafka) {}

  async onModuleInit(): Promise<void> {
    const group = this.kafka.topic(`${TOKEN_GROUP_PREFIX}.${hostname()}.${process.pid}.${randomBytes(4).toString('hex')}`);
    this.consumer = await this.kafka.bus.consume({
      groupId: group,
      topics: [this.kafka.topic(TOPICS.runTokens)],
      fromBeginning: false,
      commits: false,
      handle: async (messages) => {
        for (const message of messages) this.dispatch(message);
      },
    });
  }

  /** Hands the listener every delta of the org's run from now on; returns the unsubscribe function. */
  subscribe(org: string, runId: string, listener: TokenListener): () => void {
    const key = `${org}/${runId}`;
    let set = this.listeners.get(key);
    if (!set) this.listeners.set(key, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.listeners.get(key) === set) this.listeners.delete(key);
    };
  }

  /** Runs with a stream listening on this gateway now. */
  get listenedRuns(): number {
    return this.listeners.size;
  }

  dispatch(message: Pick<InboundMessage, 'value' | 'partition' | 'offset' | 'undecodable'>): void {
    // A record batch the client could not read counts once, as one unreadable record.
    const reading = message.undecodable ? { ok: false as const, detail: `an undecodable record batch (${message.undecodable.reason})` } : readRunTokenDelta(message.value);
    if (!reading.ok) {
      this.unreadable.inc();
      if (Date.now() - this.lastWarned > 60_000) {
        this.lastWarned = Date.now();
        this.logger.warn(`skipped an unreadable run token record (partition ${message.partition}, offset ${message.offset}): ${reading.detail}`);
      }
      return;
    }
    const { delta } = reading;
    const set = this.listeners.get(`${delta.org}/${delta.run_id}`);
    if (!set) return;
    for (const listener of [...set]) listener(delta);
  }

  /** Ready once the consumer is in its group: a stream opened after that sees every later delta. */
  async check(): Promise<void> {
    if (!this.consumer?.isRunning()) throw new Error('the run token consumer has not joined its group');
  }

  async onApplicationShutdown(): Promise<void> {
    await this.consumer?.stop();
  }
}
