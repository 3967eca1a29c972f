import { Inject, Injectable } from '@nestjs/common';
import { createSnapshotActivities } from '@agentrun/activities';
import { lanesFor } from '@agentrun/commands';
import { LaneWorkers, PLATFORM_CONFIG, type LaneWorkerOptions } from '@agentrun/runtime';
import type { SnapshotterConfig } from './config';

/** Serves the `snapshots` lane: workspace captures into the object store. */
@Injectable()
export class SnapshotLaneWorker extends LaneWorkers {
  constructor(@Inject(PLATFORM_CONFIG) private readonly config: SnapshotterConfig) {
    super(config);
  }

  protected lanes(): LaneWorkerOptions[] {
    return [
      {
        taskQueue: lanesFor(this.config.AGENTRUN_TASK_QUEUE_PREFIX).snapshots,
        maxConcurrentActivityTaskExecutions: this.config.SNAPSHOT_SLOTS,
        activities: createSnapshotActivities({ workspaceRoot: this.config.WORKSPACE_ROOT, objectStoreDir: this.config.OBJECT_STORE_DIR }),
      },
    ];
  }
}
