import { Inject, Injectable } from '@nestjs/common';
import { createAgentActivities, createChatClient, createPublishActivities, CPU_TOOLS } from '@agentrun/activities';
import { createObjectStore, objectStoreConfigOf } from '@agentrun/archive';
import { FaultPoints } from '@agentrun/config';
import { lanesFor } from '@agentrun/contracts';
import { EffectLedger, GpuLeases } from '@agentrun/persistence';
import { Database, Kafka, LaneWorkers, PLATFORM_CONFIG, type LaneWorkerOptions } from '@agentrun/runtime';
import type { OrchestratorConfig } from './config';

/**
 * Workflow code (with the event publisher beside it) on the `agent-workflows` lane, and the CPU
 * tools on `cpu-tools`.
 */
@Injectable()
export class TemporalWorkers extends LaneWorkers {
  constructor(
    @Inject(PLATFORM_CONFIG) private readonly config: OrchestratorConfig,
    private readonly db: Database,
    private readonly kafka: Kafka,
  ) {
    super(config);
  }

  protected lanes(): LaneWorkerOptions[] {
    const lanes = lanesFor(this.config.AGENTRUN_TASK_QUEUE_PREFIX);
    const store = createObjectStore(objectStoreConfigOf(this.config));
    const workflowSource = this.config.WORKFLOW_BUNDLE_PATH
      ? { workflowBundle: { codePath: this.config.WORKFLOW_BUNDLE_PATH } }
      : { workflowsPath: require.resolve('@agentrun/workflows') };
    return [
      {
        taskQueue: lanes.agentWorkflows,
        ...workflowSource,
        activities: createPublishActivities({ bus: this.kafka.bus, topicPrefix: this.kafka.topicPrefix, faults: new FaultPoints(this.config.AGENTRUN_FAULTS, this.config.AGENTRUN_PROFILE) }),
      },
      {
        taskQueue: lanes.cpuTools,
        activities: createAgentActivities({
          workspaceRoot: this.config.WORKSPACE_ROOT,
          effects: new EffectLedger(this.db.dataSource),
          tools: CPU_TOOLS,
          chat: createChatClient({
            baseUrl: this.config.MODEL_BASE_URL,
            apiKey: this.config.MODEL_API_KEY,
            model: this.config.MODEL_NAME,
            timeoutMs: this.config.MODEL_TIMEOUT_MS,
          }),
          compensations: new GpuLeases(this.db.dataSource),
          // Forks restore their snapshot here, where workspaces are prepared.
          snapshots: { store, maxBytes: this.config.SNAPSHOT_RESTORE_MAX_BYTES },
          pace: { ticks: this.config.TOOL_PACE_TICKS, tickMs: this.config.TOOL_PACE_MS },
          payloads: { store, inlineMaxBytes: this.config.AGENTRUN_PAYLOAD_INLINE_MAX_BYTES },
        }),
      },
    ];
  }
}
