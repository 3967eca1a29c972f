import { Inject, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import type { ReadinessCheck } from './health';
import type { TemporalConfig } from '@agentrun/config';
import { PLATFORM_CONFIG } from './infrastructure';
import { WorkerPool, type LaneWorkerOptions } from './worker-pool';

/**
 * A service's Temporal workers as a Nest provider: started with the module, drained before the
 * connections close. Subclasses say which lanes they serve and with what.
 */
export abstract class LaneWorkers implements OnApplicationBootstrap, OnModuleDestroy, ReadinessCheck {
  readonly name = 'temporal-workers';
  private pool?: WorkerPool;

  constructor(@Inject(PLATFORM_CONFIG) protected readonly platform: TemporalConfig) {}

  protected abstract lanes(): LaneWorkerOptions[];

  /** Told of the running pool (its connection's workflow service and namespace), once. */
  protected started?(pool: WorkerPool): void;

  /** Before the workers drain (they are still running). */
  protected stopping?(): Promise<void>;

  /** After every provider has started, so no task arrives before the database is connected. */
  async onApplicationBootstrap(): Promise<void> {
    this.pool = await WorkerPool.start(this.platform, this.lanes());
    this.started?.(this.pool);
  }

  async check(): Promise<void> {
    if (!this.pool) throw new Error('workers not started');
    await this.pool.check();
  }

  async onModuleDestroy(): Promise<void> {
    await this.stopping?.();
    await this.pool?.stop();
  }
}
