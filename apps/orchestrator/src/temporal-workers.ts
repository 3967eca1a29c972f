import { createHash } from 'node:crypto';
import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { carriedEventsInterceptor, createAgentActivities, type TokenSink, StalledCarriers, createCaseSource, createChatClient, createPublishActivities, CPU_TOOLS, RunEventPublisher, type PublishDeps } from '@agentrun/activities';
import { createObjectStore, objectStoreConfigOf } from '@agentrun/archive';
import { hostLanesFor, lanesFor, TOPICS } from '@agentrun/contracts';
import { BudgetLedger, EffectLedger, GpuLeases, RateLimiter } from '@agentrun/persistence';
import { Database, Kafka, LaneWorkers, PLATFORM_CONFIG, runEventPublishing, temporalCarrierReader, type LaneWorkerOptions, type WorkerPool } from '@agentrun/runtime';
import type { InjectedSinks } from '@temporalio/worker';
import type { RunEventSinks } from '@agentrun/workflows';
import { FaultPoints } from '@agentrun/config';
import { processMetrics } from '@agentrun/telemetry';
import { servesCpuToolsWithWorkflows, type OrchestratorConfig } from './config';

/**
 * The roles that poll Temporal: `workflows` runs workflow code (with the event publisher beside it) on
 * the `agent-workflows` lane, `cpu-tools` runs the CPU tools and model calls on `cpu-tools`. The module
 * provides Postgres only with `cpu-tools` (or `commands`), so it is optional here; Kafka is optional
 * for the unit tests that make this class without it.
 */
@Injectable()
export class TemporalWorkers extends LaneWorkers {
  constructor(
    @Inject(PLATFORM_CONFIG) private readonly config: OrchestratorConfig,
    @Optional() private readonly db?: Database,
    @Optional() private readonly kafka?: Kafka,
  ) {
    super(config);
  }

  protected lanes(): LaneWorkerOptions[] {
    const roles = this.config.ORCHESTRATOR_ROLES;
    return [...(roles.has('workflows') ? [this.workflowLane()] : []), ...(roles.has('cpu-tools') ? this.cpuToolLanes() : [])];
  }

  private readonly carrierLog = new Logger('CarriedRunEvents');
  private readonly tokenLog = new Logger('RunTokens');

  private publishing?: PublishDeps;

  /** The watch on carried calls their lane has not started (workflows role). */
  private stalled?: StalledCarriers;

  /** How this process publishes run events (made once): the workflow lane's activity and sink, and the calls that carry them. */
  private publishDeps(kafka: Kafka): PublishDeps {
    return (this.publishing ??= runEventPublishing(kafka, this.config));
  }

  /**
   * True when this process's workflow worker serves the CPU tools too, on the workflow's own task queue
   * (the `workflows` and `cpu-tools` roles here): the runs an all-roles process starts with
   * AGENTRUN_CPU_TOOLS_WITH_WORKFLOWS put their CPU lane there, so the SDK dispatches those calls
   * eagerly. Served whatever that setting says now, so runs started while it was on still finish.
   */
  private colocated(): boolean {
    return servesCpuToolsWithWorkflows(this.config);
  }

  private workflowLane(): LaneWorkerOptions {
    const kafka = required(this.kafka, 'Kafka', 'workflows');
    const workflowSource = this.config.WORKFLOW_BUNDLE_PATH
      ? { workflowBundle: { codePath: this.config.WORKFLOW_BUNDLE_PATH } }
      : { workflowsPath: require.resolve('@agentrun/workflows') };
    const publish = this.publishDeps(kafka);
    const logger = new Logger('RunEventPublisher');
    const stalled = (this.stalled = new StalledCarriers(publish, { afterMs: this.config.AGENTRUN_CARRIER_STALL_MS, log: (m) => this.carrierLog.log(m) }));
    const publisher = new RunEventPublisher(publish, {
      onFailure: (workflow, attempt, err) =>
        logger.warn(`run events of ${workflow.workflowId} not acknowledged (attempt ${attempt}); the workflow task waits and they are sent again: ${err instanceof Error ? err.message : String(err)}`),
    });
    // The CPU tools beside the workflows, for the runs this process starts (each call carries run events).
    const tools = this.colocated() ? { activities: { ...createPublishActivities(publish), ...this.cpuActivities() }, maxConcurrentActivityTaskExecutions: this.config.CPU_TOOL_SLOTS, ...this.carrier() } : {};
    return {
      taskQueue: lanesFor(this.config.AGENTRUN_TASK_QUEUE_PREFIX).agentWorkflows,
      ...workflowSource,
      // New executions publish by activity (AGENTRUN_RUN_EVENTS_VIA), as did those recorded before the sink.
      activities: createPublishActivities(publish),
      ...tools,
      // Executions recorded with the sink's patch, and runs started with AGENTRUN_RUN_EVENTS_VIA=workflow-task.
      // Never during replay: those events went out before their task completed the first time.
      // The carried outbox's watch calls: never during replay either (the run was watched when they were made).
      sinks: {
        runEvents: {
          publish: { fn: (info, events) => publisher.publish(info, events), callDuringReplay: false },
          carrying: { fn: (info) => stalled.carrying(info), callDuringReplay: false },
          landed: { fn: (info) => stalled.landed(info), callDuringReplay: false },
        },
      } satisfies InjectedSinks<RunEventSinks>,
    };
  }

  protected override started(pool: WorkerPool): void {
    this.stalled?.attach(temporalCarrierReader(pool.workflowService, pool.namespace));
  }

  protected override async stopping(): Promise<void> {
    await this.stalled?.stop();
  }

  /**
   * The shared `cpu-tools` lane (model calls, compensations, and where a run's workspace is prepared or
   * restored), and on a workspace host (AGENTRUN_WORKSPACE_HOST_ID) also the host's own `cpu-tools@<host>`,
   * where the runs whose workspace is here send their CPU tools. One set of activities serves both.
   */
  private cpuToolLanes(): LaneWorkerOptions[] {
    const prefix = this.config.AGENTRUN_TASK_QUEUE_PREFIX;
    const host = this.config.AGENTRUN_WORKSPACE_HOST_ID;
    const activities = this.cpuActivities();
    const carrier = this.carrier();
    return [
      { taskQueue: lanesFor(prefix).cpuTools, activities, maxConcurrentActivityTaskExecutions: this.config.CPU_TOOL_SLOTS, ...carrier },
      ...(host ? [{ taskQueue: hostLanesFor(prefix, host).cpuTools, activities, maxConcurrentActivityTaskExecutions: this.config.CPU_TOOL_SLOTS, ...carrier }] : []),
    ];
  }

  /** The run events a call carries are published before it runs, where this process has Kafka. */
  private carrier(): Pick<LaneWorkerOptions, 'interceptors'> {
    // (A `cpu-tools`-only process has Kafka for its model calls' deltas, not to publish run events.)
    const roles = this.config.ORCHESTRATOR_ROLES;
    const publishes = roles.has('workflows') || roles.has('commands');
    return this.kafka && publishes ? { interceptors: { activity: [carriedEventsInterceptor(this.publishDeps(this.kafka), (m) => this.carrierLog.warn(m))] } } : {};
  }

  private cpuTools?: ReturnType<typeof createAgentActivities>;

  /** The CPU tools and model calls (made once: every lane that serves them shares one set). */
  private cpuActivities(): ReturnType<typeof createAgentActivities> {
    return (this.cpuTools ??= this.makeCpuActivities());
  }

  private makeCpuActivities(): ReturnType<typeof createAgentActivities> {
    const db = required(this.db, 'Database', 'cpu-tools');
    const store = createObjectStore(objectStoreConfigOf(this.config));
    const prefix = this.config.AGENTRUN_TASK_QUEUE_PREFIX;
    const host = this.config.AGENTRUN_WORKSPACE_HOST_ID;
    const chatOf = (model: string) =>
      createChatClient({ baseUrl: this.config.MODEL_BASE_URL, apiKey: this.config.MODEL_API_KEY, model, timeoutMs: this.config.MODEL_TIMEOUT_MS });
    const byModel = new Map<string, ReturnType<typeof chatOf>>();
    return createAgentActivities({
      workspaceRoot: this.config.WORKSPACE_ROOT,
      effects: new EffectLedger(db.dataSource),
      tools: CPU_TOOLS,
      chat: chatOf(this.config.MODEL_NAME),
      // An agent eval names its model under test; the endpoint is this worker's.
      chatFor: (model) => byModel.get(model) ?? byModel.set(model, chatOf(model)).get(model)!,
      // Eval cases' files seed their agents' workspaces here.
      cases: createCaseSource(store),
      compensations: new GpuLeases(db.dataSource),
      // Forks restore their snapshot here, where workspaces are prepared.
      snapshots: { store, maxBytes: this.config.SNAPSHOT_RESTORE_MAX_BYTES },
      pace: { ticks: this.config.TOOL_PACE_TICKS, tickMs: this.config.TOOL_PACE_MS },
      payloads: { store, inlineMaxBytes: this.config.AGENTRUN_PAYLOAD_INLINE_MAX_BYTES },
      prices: this.config.AGENTRUN_MODEL_PRICES,
      budgets: new BudgetLedger(db.dataSource),
      maxTokens: this.config.AGENTRUN_MODEL_MAX_TOKENS,
      ...(this.kafka ? { tokens: tokenSinkOf(this.kafka, this.tokenLog) } : {}),
      faults: new FaultPoints(this.config.AGENTRUN_FAULTS, this.config.AGENTRUN_PROFILE),
      rateLimits: {
        limiter: new RateLimiter(db.dataSource),
        limits: this.config.AGENTRUN_MODEL_RATE_LIMITS,
        weights: this.config.AGENTRUN_TIER_WEIGHTS,
        endpoint: endpointOf(this.config.MODEL_BASE_URL, this.config.MODEL_API_KEY),
      },
      ...(host ? { placement: { host, lanes: hostLanesFor(prefix, host) } } : {}),
    });
  }
}

/**
 * What a model's shared rate limits are counted under: the server and which key (a digest of it, never
 * the key), so processes calling one provider with one key share a bucket and another key has its own.
 */
function endpointOf(baseUrl: string, apiKey: string | undefined): string {
  const key = apiKey ? createHash('sha256').update(apiKey).digest('hex').slice(0, 16) : 'no-key';
  return `${baseUrl.replace(/\/+$/, '')}#${key}`;
}

/** Model reply deltas onto `agentrun.run-tokens.v1`, keyed by run id; a failed send is logged at most once a minute. */
function tokenSinkOf(kafka: Kafka, log: Logger): { sink: TokenSink; onError: (err: unknown, dropped: number) => void } {
  const topic = kafka.topic(TOPICS.runTokens);
  const droppedDeltas = processMetrics().runTokensDropped();
  let lastLogged = 0;
  return {
    sink: { send: (deltas) => kafka.bus.sendLive(topic, deltas.map((d) => ({ key: d.run_id, value: JSON.stringify(d) }))) },
    onError: (err, dropped) => {
      droppedDeltas.inc(dropped);
      if (Date.now() - lastLogged < 60_000) return;
      lastLogged = Date.now();
      log.warn(`model reply deltas dropped (live only; the step's event keeps the whole reply): ${(err as Error)?.message ?? String(err)}`);
    },
  };
}

function required<T>(provider: T | undefined, what: string, role: string): T {
  if (!provider) throw new Error(`the ${role} role needs ${what}, which the module did not provide`);
  return provider;
}
