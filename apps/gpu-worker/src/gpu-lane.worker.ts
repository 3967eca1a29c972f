import { Inject, Injectable } from '@nestjs/common';
import { createObjectStore, objectStoreConfigOf } from '@agentrun/archive';
import { createAgentActivities, createEvalActivities, GPU_TOOLS } from '@agentrun/activities';
import { lanesFor } from '@agentrun/contracts';
import { EffectLedger, GpuLeases } from '@agentrun/persistence';
import { Database, LaneWorkers, PLATFORM_CONFIG, type LaneWorkerOptions } from '@agentrun/runtime';
import type { GpuWorkerConfig } from './config';

/**
 * Serves the shared `gpu-tools` lane (one tool per GPU slot) and the `gpu-eval` lane (benchmark cases).
 * A run on a workspace host sends its GPU tools here staged: the workspace by object-store reference,
 * restored into a temporary root, the files the tool wrote returned to the host (WORKSPACE_ROOT is
 * used only by runs on a shared volume).
 */
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
          payloads: { store: createObjectStore(objectStoreConfigOf(this.config)), inlineMaxBytes: this.config.AGENTRUN_PAYLOAD_INLINE_MAX_BYTES },
        }),
      },
      {
        taskQueue: lanesFor(this.config.AGENTRUN_TASK_QUEUE_PREFIX).gpuEval,
        maxConcurrentActivityTaskExecutions: this.config.EVAL_SLOTS,
        activities: createEvalActivities({
          effects: new EffectLedger(this.db.dataSource),
          ticks: this.config.CASE_TICKS,
          tickMs: this.config.CASE_TICK_MS,
          hiccupFraction: this.config.CASE_HICCUP_PER_MILLE / 1000,
        }),
      },
    ];
  }
}
