import { Inject, Injectable } from '@nestjs/common';
import { createAgentActivities, LocalObjectStore, GPU_TOOLS } from '@agentrun/activities';
import { lanesFor } from '@agentrun/commands';
import { EffectLedger, GpuLeases } from '@agentrun/persistence';
import { Database, LaneWorkers, PLATFORM_CONFIG, type LaneWorkerOptions } from '@agentrun/runtime';
import type { GpuWorkerConfig } from './config';

/** Serves the `gpu-tools` lane, one activity per GPU slot. */
@Injectable()
export class GpuLaneWorker extends LaneWorkers {
  constructor(
    @Inject(PLATFORM_CONFIG) private readonly config: GpuWorkerConfig,
    private readonly db: Database,
  ) {
    super(config);
  }

  protected lanes(): LaneWorkerOptions[] {
    return [
      {
        taskQueue: lanesFor(this.config.AGENTRUN_TASK_QUEUE_PREFIX).gpuTools,
        maxConcurrentActivityTaskExecutions: this.config.GPU_SLOTS,
        activities: createAgentActivities({
          workspaceRoot: this.config.WORKSPACE_ROOT,
          effects: new EffectLedger(this.db.dataSource),
          tools: GPU_TOOLS,
          gpuLeases: new GpuLeases(this.db.dataSource),
          pace: { ticks: this.config.TOOL_PACE_TICKS, tickMs: this.config.TOOL_PACE_MS },
          payloads: { store: new LocalObjectStore(this.config.OBJECT_STORE_DIR), inlineMaxBytes: this.config.AGENTRUN_PAYLOAD_INLINE_MAX_BYTES },
        }),
      },
    ];
  }
}
