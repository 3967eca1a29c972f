import { Inject, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import type { Client } from '@temporalio/client';
import type { ReadinessCheck } from './health';
import type { TemporalConfig } from '@agentrun/config';
import { PLATFORM_CONFIG } from './infrastructure';
import { WorkerPool, type LaneWorkerOptions } from './worker-pool';

/**
 * Starts this process's own workflow workers can take at once (eager workflow start): a client on their
 * connection while they run, undefined before they start and from the moment they begin to stop.
 */
export interface LocalWorkflowStarts {
  client(): Client | undefined;
}

/** The provider of `LocalWorkflowStarts`, in a process that both starts workflows and runs their worker. */
export const LOCAL_WORKFLOW_STARTS = Symbol('LOCAL_WORKFLOW_STARTS');

/**
 * A service's Temporal workers as a Nest provider: started with the module, drained before the
 * connections close. Subclasses say which lanes they serve and with what.
 */
export abstract class LaneWorkers implements OnApplicationBootstrap, OnModuleDestroy, ReadinessCheck, LocalWorkflowStarts {
  readonly name = 'temporal-workers';
  private pool?: WorkerPool;
  private starter?: Client;

  constructor(@Inject(PLATFORM_CONFIG) protected readonly platform: TemporalConfig) {}

  protected abstract lanes(): LaneWorkerOptions[];

  /** Told of the running pool (its connection's workflow service and namespace), once. */
  protected started?(pool: WorkerPool): void;

  /** Before the workers drain (they are still running). */
  protected stopping?(): Promise<void>;

  /** After every provider has started, so no task arrives before the database is connected. */
  async onApplicationBootstrap(): Promise<void> {
    this.pool = await WorkerPool.start(this.platform, this.lanes());
    this.starter = this.pool.client();
    this.started?.(this.pool);
  }

  client(): Client | undefined {
    return this.starter;
  }

  async check(): Promise<void> {
    if (!this.pool) throw new Error('workers not started');
    await this.pool.check();
  }

  async onModuleDestroy(): Promise<void> {
    // Starts made from now on go through the server: the workers are about to drain.
    this.starter = undefined;
    await this.stopping?.();
    await this.pool?.stop();
  }
}
