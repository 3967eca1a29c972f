import { Inject, Injectable, Logger } from '@nestjs/common';
import { createObjectStore, objectStoreConfigOf } from '@agentrun/archive';
import { carriedEventsInterceptor, createAgentActivities, createCaseSource, createChatClient, createEvalActivities, GPU_TOOLS, type ChatClient, type ChatClientFor } from '@agentrun/activities';
import { modelEndpointsOf, readNamedSecret } from '@agentrun/config';
import { lanesFor } from '@agentrun/contracts';
import { BudgetLedger, EffectLedger, GpuLeases } from '@agentrun/persistence';
import { Database, Kafka, LaneWorkers, PLATFORM_CONFIG, runEventPublishing, type LaneWorkerOptions } from '@agentrun/runtime';
import type { GpuWorkerConfig } from './config';

/**
 * Serves the shared `gpu-tools` lane (one tool per GPU slot) and the `gpu-eval` lane (benchmark cases).
 * A run on a workspace host sends its GPU tools here staged: the workspace by object-store reference,
 * restored into a temporary root, the files the tool wrote returned to the host (WORKSPACE_ROOT is
 * used only by runs on a shared volume). A `gpu-tools` call carries the run's unpublished events, which
 * this worker publishes while the tool runs, as the orchestrator does for `cpu-tools` calls.
 */
@Injectable()
export class GpuLaneWorker extends LaneWorkers {
  constructor(
    @Inject(PLATFORM_CONFIG) private readonly config: GpuWorkerConfig,
    private readonly db: Database,
    private readonly kafka: Kafka,
  ) {
    super(config);
  }

  /** Chat clients for the eval lane by endpoint and model; a key is read from its secret when the client is made. */
  private chatFor(): ChatClientFor {
    const endpoints = modelEndpointsOf(this.config);
    const clients = new Map<string, ChatClient>();
    return (name = 'default', model) => {
      const endpoint = endpoints[name];
      // The starter checked the name against the same setting: a miss means the two processes disagree.
      if (!endpoint) throw new Error(`no model endpoint '${name}' on this worker (AGENTRUN_MODEL_ENDPOINTS)`);
      const key = `${name}\u0000${model}`;
      let client = clients.get(key);
      if (!client) {
        const apiKey = endpoint.api_key_secret ? readNamedSecret(endpoint.api_key_secret) : name === 'default' ? this.config.MODEL_API_KEY : undefined;
        client = createChatClient({ baseUrl: endpoint.base_url, model, timeoutMs: this.config.EVAL_MODEL_TIMEOUT_MS, ...(apiKey ? { apiKey } : {}) });
        clients.set(key, client);
      }
      return client;
    };
  }

  private readonly carrierLog = new Logger('CarriedRunEvents');

  protected lanes(): LaneWorkerOptions[] {
    const store = createObjectStore(objectStoreConfigOf(this.config));
    const carrier = carriedEventsInterceptor(runEventPublishing(this.kafka, this.config), (m) => this.carrierLog.warn(m));
    return [
      {
        taskQueue: lanesFor(this.config.AGENTRUN_TASK_QUEUE_PREFIX).gpuTools,
        maxConcurrentActivityTaskExecutions: this.config.GPU_SLOTS,
        interceptors: { activity: [carrier] },
        activities: createAgentActivities({
          workspaceRoot: this.config.WORKSPACE_ROOT,
          effects: new EffectLedger(this.db.dataSource),
          tools: GPU_TOOLS,
          gpuLeases: new GpuLeases(this.db.dataSource),
          pace: { ticks: this.config.TOOL_PACE_TICKS, tickMs: this.config.TOOL_PACE_MS },
          payloads: { store, inlineMaxBytes: this.config.AGENTRUN_PAYLOAD_INLINE_MAX_BYTES },
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
          real: {
            cases: createCaseSource(store),
            chatFor: this.chatFor(),
            maxTokens: this.config.EVAL_MAX_TOKENS,
            store,
            prices: this.config.AGENTRUN_MODEL_PRICES,
            // Each case's worst case is reserved against its eval's budget and its org's month.
            budgets: new BudgetLedger(this.db.dataSource),
          },
        }),
      },
    ];
  }
}
