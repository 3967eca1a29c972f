import { Inject, Injectable } from '@nestjs/common';
import { createSnapshotActivities } from '@agentrun/activities';
import { createObjectStore, objectStoreConfigOf } from '@agentrun/archive';
import { quotaFor } from '@agentrun/config';
import { workspaceQueueFor } from '@agentrun/contracts';
import { Database, LaneWorkers, PLATFORM_CONFIG, type LaneWorkerOptions } from '@agentrun/runtime';
import type { SnapshotterConfig } from './config';

/** Serves the `snapshots` lane (on a workspace host, its own `snapshots@<host>`): captures (archive, trajectory, state) into the object store. */
@Injectable()
export class SnapshotLaneWorker extends LaneWorkers {
  constructor(
    @Inject(PLATFORM_CONFIG) private readonly config: SnapshotterConfig,
    private readonly db: Database,
  ) {
    super(config);
  }

  protected lanes(): LaneWorkerOptions[] {
    return [
      {
        taskQueue: workspaceQueueFor(this.config.AGENTRUN_TASK_QUEUE_PREFIX, this.config.AGENTRUN_WORKSPACE_HOST_ID, 'snapshots'),
        maxConcurrentActivityTaskExecutions: this.config.SNAPSHOT_SLOTS,
        activities: createSnapshotActivities({
          workspaceRoot: this.config.WORKSPACE_ROOT,
          store: createObjectStore(objectStoreConfigOf(this.config)),
          db: this.db.dataSource,
          paceMs: this.config.SNAPSHOT_PACE_MS,
          quota: (org) => quotaFor(this.config.AGENTRUN_QUOTAS, org),
        }),
      },
    ];
  }
}
