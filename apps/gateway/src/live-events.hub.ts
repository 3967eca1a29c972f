import { Inject, Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { quotaFor } from '@agentrun/config';
import { databaseOptionsFrom, listenForRunTouches, parseRunTouches, ReadModel, RUN_EVENTS_CHANNEL, RunEventFanout, runTouchClient, type RunStreamSink } from '@agentrun/persistence';
import { PLATFORM_CONFIG, type ReadinessCheck } from '@agentrun/runtime';
import type { Client } from 'pg';
import { processMetrics } from '@agentrun/telemetry';
import type { GatewayConfig } from './config';

/** Why a stream may not open: the org is at its quota (429), or this gateway at its own limit (503). */
export type StreamRefusal = { status: 429 | 503; detail: string };

/**
 * One LISTEN connection per gateway, fanned out in process: the projector NOTIFYs on commit, the new
 * events of every run the notice touched are read in one batched query, and every stream on those runs
 * sends what is past its own cursor.
 * After a lost connection every run with a stream is read once, since notices sent meanwhile are gone.
 * It also counts the open streams, per org (AGENTRUN_QUOTAS `sse_streams`) and in all
 * (GATEWAY_SSE_MAX_STREAMS); both counts are this process's, so with several gateways an org may hold
 * its quota on each.
 */
@Injectable()
export class LiveEventsHub implements OnModuleInit, OnApplicationShutdown, ReadinessCheck {
  readonly name = 'live-events';
  private readonly logger = new Logger(LiveEventsHub.name);
  private readonly fanout: RunEventFanout;
  private readonly openByOrg = new Map<string, number>();
  private open = 0;
  private client?: Client;
  private connected = false;
  private closing = false;
  private reconnectTimer?: NodeJS.Timeout;

  constructor(
    @Inject(PLATFORM_CONFIG) private readonly config: GatewayConfig,
    readModel: ReadModel,
  ) {
    this.fanout = new RunEventFanout((reads, limit, each) => readModel.eachEventsAfter(reads, limit, each));
    processMetrics().sseStreams(() => this.open);
  }

  /** Streams open on this gateway now. */
  get openStreams(): number {
    return this.open;
  }

  /**
   * Takes a stream slot for the org, or says why not. The release function gives it back (once,
   * however often it is called).
   */
  admit(org: string): { release: () => void } | StreamRefusal {
    const quota = quotaFor(this.config.AGENTRUN_QUOTAS, org).sse_streams;
    const held = this.openByOrg.get(org) ?? 0;
    if (this.open >= this.config.GATEWAY_SSE_MAX_STREAMS) {
      return { status: 503, detail: `this gateway holds its limit of ${this.config.GATEWAY_SSE_MAX_STREAMS} open streams (GATEWAY_SSE_MAX_STREAMS); retry later` };
    }
    if (held >= quota) {
      return { status: 429, detail: `org ${org} holds ${held} open streams, its limit (sse_streams in AGENTRUN_QUOTAS) is ${quota}: close one first` };
    }
    this.open++;
    this.openByOrg.set(org, held + 1);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.open--;
        const left = (this.openByOrg.get(org) ?? 1) - 1;
        if (left > 0) this.openByOrg.set(org, left);
        else this.openByOrg.delete(org);
      },
    };
  }

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
    // Touched together, read together: the fan-out reads once this loop is done.
    for (const touch of touches) this.fanout.touch(touch.org, touch.run_id);
  }

  private wakeAll(): void {
    this.fanout.touchAll();
  }

  /** Hands the stream the run's new events whenever a commit touches it; returns the unsubscribe function. */
  subscribe(org: string, runId: string, sink: RunStreamSink): () => void {
    return this.fanout.subscribe(org, runId, sink);
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
