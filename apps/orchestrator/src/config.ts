import {
  bool,
  commandKeySpec,
  databaseSpec,
  eventSigningSpec,
  int,
  kafkaSpec,
  lifecycleSpec, tracingSpec,
  loggingSpec,
  modeSpec,
  list,
  loadServiceConfig,
  objectStoreSpec,
  modelEndpointNamesSpec,
  modelPricesSpec,
  modelRateLimitsSpec,
  optionalStr,
  profileSpec,
  quotasSpec,
  runDefaultsSpec,
  str,
  temporalSpec,
  toolActivitySpec,
  workspaceSpec,
  type ConfigOf,
  type Setting,
  type Env,
} from '@agentrun/config';

export const ORCHESTRATOR_ROLES = ['commands', 'workflows', 'cpu-tools'] as const;
export type OrchestratorRole = (typeof ORCHESTRATOR_ROLES)[number];

function roles(): Setting<ReadonlySet<OrchestratorRole>> {
  const names = list([...ORCHESTRATOR_ROLES]);
  return {
    read(env, key) {
      const given = names.read(env, key);
      const unknown = given.filter((r) => !(ORCHESTRATOR_ROLES as readonly string[]).includes(r));
      if (unknown.length) throw new Error(`${key} must name roles among ${ORCHESTRATOR_ROLES.join(', ')}, got '${unknown.join(', ')}'`);
      if (given.length === 0) throw new Error(`${key} must name at least one of ${ORCHESTRATOR_ROLES.join(', ')}`);
      return new Set(given as OrchestratorRole[]);
    },
  };
}

export const orchestratorSpec = {
  ...lifecycleSpec,
  ...tracingSpec,
  ...loggingSpec,
  ...modeSpec,
  ...profileSpec,
  ...kafkaSpec,
  ...temporalSpec,
  ...databaseSpec,
  ...workspaceSpec,
  ...objectStoreSpec,
  ...modelEndpointNamesSpec,
  ...modelPricesSpec,
  // Model calls wait their turn under the limits every worker shares, fairly by tier.
  ...modelRateLimitsSpec,
  // The CPU tool lane runs here.
  ...toolActivitySpec,
  // Kafka commands start runs, so the orchestrator reads the same run defaults as the gateway.
  ...runDefaultsSpec,
  // Kafka starts are held to the same per-org quotas as HTTP ones.
  ...quotasSpec,
  // Commands on Kafka are verified against keys derived from it (production mode).
  ...commandKeySpec,
  // The workflows role signs every run event it publishes; production refuses to start without keys.
  ...eventSigningSpec,
  /**
   * What this process does: `commands` (the Kafka command consumer), `workflows` (the workflow worker and
   * the event publisher beside it), `cpu-tools` (the CPU tool lane). All three by default; a cluster runs
   * each as its own Deployment so each scales on its own signal.
   */
  ORCHESTRATOR_ROLES: roles(),
  ORCHESTRATOR_HOST: str('127.0.0.1'),
  ORCHESTRATOR_PORT: int(8081, 1, 65535),
  /** The model behind `callModel`: any OpenAI-compatible server (the local one by default). */
  MODEL_BASE_URL: str('http://127.0.0.1:8090/v1'),
  MODEL_API_KEY: optionalStr(),
  MODEL_NAME: str('scripted'),
  MODEL_TIMEOUT_MS: int(30_000, 100, 600_000),
  /** A model call's completion limit (its `max_tokens`), and so the worst case a budget reserves for it. */
  AGENTRUN_MODEL_MAX_TOKENS: int(1_024, 1, 1_000_000),
  /**
   * CPU tool and model calls this process runs at once on each task queue it serves them on (that
   * queue's activity slots): `cpu-tools`, a workspace host's `cpu-tools@<host>`, and, with the
   * `workflows` and `cpu-tools` roles together, `agent-workflows`, where they share the slots with the
   * run-event publishing activity. A call waiting for its turn under a shared rate limit holds none:
   * its run waits on a timer.
   */
  CPU_TOOL_SLOTS: int(100, 1, 1_000),
  /**
   * With the `commands` and `workflows` roles in one process, a run's workflow is started eagerly: its first
   * task goes straight to this process's workflow worker (when it has a free slot), not through the
   * server's matching and a poll. Off, or in a process without both roles, starts go through the server.
   */
  AGENTRUN_EAGER_WORKFLOW_START: bool(true),
  /**
   * With all three roles in one process, the runs it starts put their CPU tools and model calls on the
   * workflow's own task queue (`agent-workflows`), which its workflow worker then serves as well: the
   * SDK hands each call to that worker in the answer to the workflow task that scheduled it (eager
   * activity dispatch), with no matching and no poll. Runs the gateway starts, and every run of a
   * process without all three roles, keep the `cpu-tools` queue, which the `cpu-tools` role serves as
   * before. It chooses the queue of new runs only: a process with the `workflows` and `cpu-tools` roles
   * serves CPU tools on `agent-workflows` whatever it says, so runs started while it was on finish after
   * it is turned off. Turn it off before splitting such a process into role Deployments, and let the
   * runs it started finish first: a `workflows`-only worker does not serve CPU tools.
   */
  AGENTRUN_CPU_TOOLS_WITH_WORKFLOWS: bool(true),
  /** Commands decided at once, one per partition (a partition's commands stay in order). */
  COMMAND_CONCURRENCY: int(3, 1, 64),
  /** A workflow bundle made at build time; without it the worker bundles at start. */
  WORKFLOW_BUNDLE_PATH: optionalStr(),
  /**
   * A carried call (run events riding a tool or model call) its lane has not started after this long
   * has its events published by the workflows role, read from the history: a queued or unserved GPU
   * lane holds up the call, never the run's stream.
   */
  AGENTRUN_CARRIER_STALL_MS: int(1_000, 50, 600_000),
  /** A snapshot archive whose files add up to more than this is refused when a fork restores it. */
  SNAPSHOT_RESTORE_MAX_BYTES: int(2 * 1024 ** 3, 1, Number.MAX_SAFE_INTEGER),
};
export type OrchestratorConfig = ConfigOf<typeof orchestratorSpec>;

/** True when the runs this process starts put their CPU tools on the workflow's task queue (AGENTRUN_CPU_TOOLS_WITH_WORKFLOWS). */
export function cpuToolsWithWorkflows(config: Pick<OrchestratorConfig, 'ORCHESTRATOR_ROLES' | 'AGENTRUN_CPU_TOOLS_WITH_WORKFLOWS'>): boolean {
  const roles = config.ORCHESTRATOR_ROLES;
  return config.AGENTRUN_CPU_TOOLS_WITH_WORKFLOWS && roles.has('commands') && roles.has('workflows') && roles.has('cpu-tools');
}
/**
 * True when this process's workflow worker serves the CPU tools too (the `workflows` and `cpu-tools`
 * roles together), whether or not the runs it starts now go there: those started while
 * AGENTRUN_CPU_TOOLS_WITH_WORKFLOWS was on keep that queue for life (continue-as-new and children too).
 */
export function servesCpuToolsWithWorkflows(config: Pick<OrchestratorConfig, 'ORCHESTRATOR_ROLES'>): boolean {
  const roles = config.ORCHESTRATOR_ROLES;
  return roles.has('workflows') && roles.has('cpu-tools');
}
export const loadOrchestratorConfig = (env?: Env) => loadServiceConfig(orchestratorSpec, env);
