import { Inject, Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { databaseOptionsFrom, listenForRunTouches, parseRunTouches, RUN_EVENTS_CHANNEL, runTouchClient } from '@agentrun/persistence';
import { PLATFORM_CONFIG, type ReadinessCheck } from '@agentrun/runtime';
import type { Client } from 'pg';
import type { GatewayConfig } from './config';

type Wake = () => void;

/**
 * One LISTEN connection per gateway, fanned out in process: the projector NOTIFYs on commit and
 * every stream of a touched run wakes and reads what is new. After a lost connection every stream
 * wakes once, since notices sent meanwhile are gone.
 */
@Injectable()
export class LiveEventsHub implements OnModuleInit, OnApplicationShutdown, ReadinessCheck {
  readonly name = 'live-events';
  private readonly logger = new Logger(LiveEventsHub.name);
  private readonly subscribers = new Map<string, Set<Wake>>();
  private client?: Client;
  private connected = false;
  private closing = false;
  private reconnectTimer?: NodeJS.Timeout;

  constructor(@Inject(PLATFORM_CONFIG) private readonly config: GatewayConfig) {}

  async onModuleInit(): Promise<void> {
    await this.connect();
  }

  private async connect(): Promise<void> {
    const client = runTouchClient(databaseOptionsFrom(this.config, 'agentrun-gateway-listen'));
    client.on('notification', (msg) => {
      if (msg.channel === RUN_EVENTS_CHANNEL) this.dispatch(msg.payload);
    });
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client, new Error('connection ended')));
    await client.connect();
    await listenForRunTouches(client);
    this.client = client;
    this.connected = true;
    this.wakeAll();
  }

  private lost(client: Client, err: Error): void {
    if (this.client !== client || this.closing) return;
    this.connected = false;
    this.client = undefined;
    this.logger.warn(`LISTEN connection lost (${err.message}); reconnecting`);
    client.end().catch(() => undefined);
    this.scheduleReconnect(500);
  }

  private scheduleReconnect(delay: number): void {
    if (this.closing || this.reconnectTimer) return;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      this.connect().catch((err: Error) => {
        this.logger.warn(`LISTEN reconnect failed: ${err.message}`);
        this.scheduleReconnect(Math.min(delay * 2, 5_000));
      });
    }, delay);
  }

  private dispatch(payload: string | undefined): void {
    const touches = parseRunTouches(payload);
    if (!touches) return this.wakeAll();
    for (const touch of touches) this.subscribers.get(key(touch.org, touch.run_id))?.forEach((wake) => wake());
  }

  private wakeAll(): void {
    for (const set of this.subscribers.values()) set.forEach((wake) => wake());
  }

  /** Calls `wake` whenever the run may have new events; returns the unsubscribe function. */
  subscribe(org: string, runId: string, wake: Wake): () => void {
    const k = key(org, runId);
    const set = this.subscribers.get(k) ?? new Set<Wake>();
    set.add(wake);
    this.subscribers.set(k, set);
    return () => {
      set.delete(wake);
      if (set.size === 0) this.subscribers.delete(k);
    };
  }

  async check(): Promise<void> {
    if (!this.connected) throw new Error('LISTEN connection is down');
  }

  async onApplicationShutdown(): Promise<void> {
    this.closing = true;
    clearTimeout(this.reconnectTimer);
    await this.client?.end().catch(() => undefined);
  }
}

function key(org: string, runId: string): string {
  return `${org}\u0000${runId}`;
}
