import { Inject, Injectable, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { createAgentActivities, GPU_TOOLS } from '@agentrun/activities';
import { lanesFor } from '@agentrun/commands';
import { EffectLedger } from '@agentrun/persistence';
import { Database, PLATFORM_CONFIG, WorkerPool, type ReadinessCheck } from '@agentrun/runtime';
import type { GpuWorkerConfig } from './config';

/** Serves the `gpu-tools` lane, one activity per GPU slot. */
@Injectable()
export class GpuLaneWorker implements OnModuleInit, OnModuleDestroy, ReadinessCheck {
  readonly name = 'temporal-workers';
  private pool?: WorkerPool;

  constructor(
    @Inject(PLATFORM_CONFIG) private readonly config: GpuWorkerConfig,
    private readonly db: Database,
  ) {}

  async onModuleInit(): Promise<void> {
    const lanes = lanesFor(this.config.AGENTRUN_TASK_QUEUE_PREFIX);
    this.pool = await WorkerPool.start(this.config.TEMPORAL_ADDRESS, this.config.TEMPORAL_NAMESPACE, [
      {
        taskQueue: lanes.gpuTools,
        maxConcurrentActivityTaskExecutions: this.config.GPU_SLOTS,
        activities: createAgentActivities({
          workspaceRoot: this.config.WORKSPACE_ROOT,
          effects: new EffectLedger(this.db.dataSource),
          tools: GPU_TOOLS,
        }),
      },
    ]);
  }

  async check(): Promise<void> {
    if (!this.pool) throw new Error('workers not started');
    await this.pool.check();
  }

  async onModuleDestroy(): Promise<void> {
    await this.pool?.stop();
  }
}
