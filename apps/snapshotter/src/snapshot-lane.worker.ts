import { Inject, Injectable, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { createSnapshotActivities } from '@agentrun/activities';
import { lanesFor } from '@agentrun/commands';
import { PLATFORM_CONFIG, WorkerPool, type ReadinessCheck } from '@agentrun/runtime';
import type { SnapshotterConfig } from './config';

/** Serves the `snapshots` lane: workspace captures into the object store. */
@Injectable()
export class SnapshotLaneWorker implements OnModuleInit, OnModuleDestroy, ReadinessCheck {
  readonly name = 'temporal-workers';
  private pool?: WorkerPool;

  constructor(@Inject(PLATFORM_CONFIG) private readonly config: SnapshotterConfig) {}

  async onModuleInit(): Promise<void> {
    const lanes = lanesFor(this.config.AGENTRUN_TASK_QUEUE_PREFIX);
    this.pool = await WorkerPool.start(this.config.TEMPORAL_ADDRESS, this.config.TEMPORAL_NAMESPACE, [
      {
        taskQueue: lanes.snapshots,
        maxConcurrentActivityTaskExecutions: this.config.SNAPSHOT_SLOTS,
        activities: createSnapshotActivities({ workspaceRoot: this.config.WORKSPACE_ROOT, objectStoreDir: this.config.OBJECT_STORE_DIR }),
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
