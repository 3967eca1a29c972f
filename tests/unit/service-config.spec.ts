/**
 * Each service declares only the settings it reads: its spec is the groups it uses (libs/config) plus
 * its own keys, so the projector, say, cannot be handed an eval or tool-pacing setting. The run
 * defaults are one group, shared by the two services that start runs.
 */
import {
  ConfigError,
  databaseSpec,
  eventSigningSpec,
  kafkaSpec,
  lifecycleSpec,
  tracingSpec,
  loggingSpec,
  modeSpec,
  objectStoreSpec,
  profileSpec,
  quotasSpec,
  runDefaultsSpec,
  modelEndpointNamesSpec,
  modelPricesSpec,
  modelRateLimitsSpec,
  WEIGHTED_TIERS,
  temporalSpec,
  toolActivitySpec,
  workspaceSpec,
  type Env,
  type Spec,
} from '@agentrun/config';
import { TIERS } from '@agentrun/contracts';
import { gatewaySpec, loadGatewayConfig } from '../../apps/gateway/src/config';
import { gpuWorkerSpec, loadGpuWorkerConfig } from '../../apps/gpu-worker/src/config';
import { loadModelServerConfig, modelServerSpec } from '../../apps/model-server/src/config';
import { loadRealModelConfig, realModelSpec } from '../../apps/model-server/src/real/config';
import { loadOrchestratorConfig, orchestratorSpec } from '../../apps/orchestrator/src/config';
import { loadProjectorConfig, projectorSpec } from '../../apps/projector/src/config';
import { loadSnapshotterConfig, snapshotterSpec } from '../../apps/snapshotter/src/config';

const GROUPS = {
  lifecycle: lifecycleSpec,
  tracing: tracingSpec,
  logging: loggingSpec,
  mode: modeSpec,
  profile: profileSpec,
  kafka: kafkaSpec,
  temporal: temporalSpec,
  database: databaseSpec,
  workspace: workspaceSpec,
  objectStore: objectStoreSpec,
  toolActivity: toolActivitySpec,
  runDefaults: runDefaultsSpec,
  modelEndpointNames: modelEndpointNamesSpec,
  modelPrices: modelPricesSpec,
  modelRateLimits: modelRateLimitsSpec,
  quotas: quotasSpec,
  eventSigning: eventSigningSpec,
} satisfies Record<string, Spec>;
type Group = keyof typeof GROUPS;

interface Service {
  spec: Spec;
  load: (env: Env) => unknown;
  groups: Group[];
  own: string[];
  /** A key of the service's own that the test sets to a value it must refuse. */
  bad: [key: string, value: string];
}

const SERVICES: Record<string, Service> = {
  gateway: {
    spec: gatewaySpec,
    load: loadGatewayConfig,
    groups: ['lifecycle', 'tracing', 'logging', 'mode', 'profile', 'kafka', 'temporal', 'database', 'objectStore', 'runDefaults', 'modelEndpointNames', 'quotas'],
    own: ['GATEWAY_PORT', 'GATEWAY_HOST', 'GATEWAY_ALLOWED_HOSTS', 'GATEWAY_TRUST_PROXY', 'GATEWAY_SESSION_IDLE_SECONDS', 'GATEWAY_SESSION_MAX_SECONDS', 'CURSOR_SECRET', 'SSE_KEEPALIVE_SECONDS', 'GATEWAY_SSE_MAX_STREAMS', 'RUN_LAST_EVENTS', 'SNAPSHOT_FILE_MAX_BYTES'],
    bad: ['AGENTRUN_MODE', 'staging'],
  },
  orchestrator: {
    spec: orchestratorSpec,
    load: loadOrchestratorConfig,
    groups: ['lifecycle', 'tracing', 'logging', 'mode', 'profile', 'kafka', 'temporal', 'database', 'workspace', 'objectStore', 'toolActivity', 'runDefaults', 'modelEndpointNames', 'modelPrices', 'modelRateLimits', 'quotas', 'eventSigning'],
    own: ['ORCHESTRATOR_ROLES', 'ORCHESTRATOR_HOST', 'ORCHESTRATOR_PORT', 'MODEL_BASE_URL', 'MODEL_API_KEY', 'MODEL_NAME', 'MODEL_TIMEOUT_MS', 'COMMAND_CONCURRENCY', 'WORKFLOW_BUNDLE_PATH', 'SNAPSHOT_RESTORE_MAX_BYTES', 'AGENTRUN_COMMAND_KEY_SECRET', 'AGENTRUN_CARRIER_STALL_MS', 'AGENTRUN_EAGER_WORKFLOW_START', 'AGENTRUN_CPU_TOOLS_WITH_WORKFLOWS', 'AGENTRUN_MODEL_MAX_TOKENS', 'CPU_TOOL_SLOTS'],
    bad: ['COMMAND_CONCURRENCY', '0'],
  },
  'gpu-worker': {
    spec: gpuWorkerSpec,
    load: loadGpuWorkerConfig,
    groups: ['lifecycle', 'tracing', 'logging', 'mode', 'profile', 'kafka', 'temporal', 'database', 'workspace', 'objectStore', 'toolActivity', 'modelEndpointNames', 'modelPrices', 'eventSigning'],
    own: ['GPU_WORKER_HOST', 'GPU_WORKER_PORT', 'GPU_SLOTS', 'EVAL_SLOTS', 'CASE_TICKS', 'CASE_TICK_MS', 'CASE_HICCUP_PER_MILLE', 'MODEL_BASE_URL', 'MODEL_API_KEY', 'EVAL_MODEL_TIMEOUT_MS', 'EVAL_MAX_TOKENS'],
    bad: ['GPU_SLOTS', 'two'],
  },
  projector: {
    spec: projectorSpec,
    load: loadProjectorConfig,
    groups: ['lifecycle', 'tracing', 'logging', 'mode', 'profile', 'kafka', 'database', 'eventSigning'],
    own: ['PROJECTOR_HOST', 'PROJECTOR_PORT', 'PROJECTOR_CONCURRENCY'],
    bad: ['PROJECTOR_CONCURRENCY', '65'],
  },
  snapshotter: {
    spec: snapshotterSpec,
    load: loadSnapshotterConfig,
    groups: ['lifecycle', 'tracing', 'logging', 'mode', 'temporal', 'database', 'workspace', 'objectStore', 'quotas'],
    own: ['SNAPSHOTTER_HOST', 'SNAPSHOTTER_PORT', 'SNAPSHOT_SLOTS', 'SNAPSHOT_PACE_MS'],
    bad: ['SNAPSHOT_SLOTS', '-1'],
  },
  'model-server': {
    spec: modelServerSpec,
    load: loadModelServerConfig,
    groups: [],
    own: ['MODEL_SERVER_PORT', 'MODEL_SERVER_HOST'],
    bad: ['MODEL_SERVER_PORT', '70000'],
  },
  'model-real': {
    spec: realModelSpec,
    load: loadRealModelConfig,
    groups: [],
    own: [
      'MODEL_REAL_PORT',
      'MODEL_REAL_HOST',
      'MODEL_REAL_NAME',
      'MODEL_REAL_MODEL_PATH',
      'AGENTRUN_LLAMA_DIR',
      'MODEL_REAL_CONTEXT_SIZE',
      'MODEL_REAL_THREADS',
      'MODEL_REAL_DEFAULT_MAX_TOKENS',
      'MODEL_REAL_QUEUE',
      'MODEL_REAL_DRAIN_MS',
    ],
    bad: ['MODEL_REAL_CONTEXT_SIZE', '100000'],
  },
};

function problemsOf(load: () => unknown): string[] {
  try {
    load();
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  throw new Error('expected a ConfigError');
}

describe.each(Object.entries(SERVICES))('%s configuration', (_name, service) => {
  it('is exactly the groups it uses and its own settings, each group shared rather than copied', () => {
    const expected = [...service.groups.flatMap((g) => Object.keys(GROUPS[g])), ...service.own];
    expect(new Set(expected).size).toBe(expected.length);
    expect(Object.keys(service.spec).sort()).toEqual([...expected].sort());
    for (const group of service.groups) {
      for (const [key, setting] of Object.entries(GROUPS[group])) expect({ key, same: service.spec[key] === setting }).toEqual({ key, same: true });
    }
  });

  it('boots on an empty environment (every setting has a default)', () => {
    expect(() => service.load({})).not.toThrow();
  });

  it('reports a bad value of its own, and one of a group it uses, by the key name', () => {
    const [key, value] = service.bad;
    // A service on the database group gets a bad pool size too: both are reported, each by its key.
    const onDatabase = service.groups.includes('database');
    const problems = problemsOf(() => service.load({ [key]: value, ...(onDatabase ? { DATABASE_POOL_SIZE: 'many' } : {}) }));
    const ownProblem = expect.stringContaining(key);
    const poolProblem = "DATABASE_POOL_SIZE must be an integer, got 'many'";
    expect(problems).toEqual(expect.arrayContaining(onDatabase ? [ownProblem, poolProblem] : [ownProblem]));
    expect(problems).toHaveLength(onDatabase ? 2 : 1);
  });

  it('ignores settings it does not declare, however wrong their values', () => {
    const foreign = ['EVAL_PARALLELISM', 'TOOL_PACE_MS', 'KAFKA_BROKERS', 'DATABASE_POOL_SIZE', 'GPU_SLOTS'].filter((key) => !(key in service.spec));
    const env = Object.fromEntries(foreign.map((key) => [key, 'not a value']));
    expect(() => service.load(env)).not.toThrow();
  });
});

describe('settings that must agree across services', () => {
  it('the projector carries nothing of evaluations, tool pacing or Temporal', () => {
    expect(Object.keys(projectorSpec).filter((k) => /^(EVAL_|TOOL_PACE_|TEMPORAL_|AGENTRUN_TASK_QUEUE)/.test(k))).toEqual([]);
  });

  it('the run defaults are read by the two services that start runs, and by no other', () => {
    const readers = Object.entries(SERVICES)
      .filter(([, s]) => Object.keys(runDefaultsSpec).some((key) => key in s.spec))
      .map(([name]) => name);
    expect(readers.sort()).toEqual(['gateway', 'orchestrator']);
  });

  it('the quotas are read by the services that enforce them (starts, streams, captures), and by no other', () => {
    const readers = Object.entries(SERVICES)
      .filter(([, s]) => 'AGENTRUN_QUOTAS' in s.spec)
      .map(([name]) => name);
    expect(readers.sort()).toEqual(['gateway', 'orchestrator', 'snapshotter']);
    const env: Env = { AGENTRUN_QUOTAS: '{"orgs": {"Acme": {"active_runs": 3}}}' };
    const quotas = [loadGatewayConfig(env), loadOrchestratorConfig(env), loadSnapshotterConfig(env)].map((c) => c.AGENTRUN_QUOTAS);
    expect(quotas[1]).toEqual(quotas[0]);
    expect(quotas[2]).toEqual(quotas[0]);
    expect(quotas[0].orgs.acme.active_runs).toBe(3);
    expect(problemsOf(() => loadGatewayConfig({ AGENTRUN_QUOTAS: '{"default": {"streams": 2}}' }))).toEqual([expect.stringMatching(/^AGENTRUN_QUOTAS\.default\.streams is not a quota/)]);
  });

  it('weights are given for exactly the tiers a run may name', () => {
    expect([...WEIGHTED_TIERS]).toEqual([...TIERS]);
  });

  it('gateway and orchestrator read the same run defaults from the same environment', () => {
    const env: Env = { AGENTRUN_STEPS_PER_EXECUTION: '7', EVAL_PARALLELISM: '9', AGENTRUN_ERRORED_TURN_UNGRADED: 'true' };
    const pick = (config: unknown) => Object.fromEntries(Object.keys(runDefaultsSpec).map((k) => [k, (config as Record<string, unknown>)[k]]));
    const fromGateway = pick(loadGatewayConfig(env));
    expect(fromGateway).toMatchObject({ AGENTRUN_STEPS_PER_EXECUTION: 7, EVAL_PARALLELISM: 9, AGENTRUN_ERRORED_TURN_UNGRADED: true });
    expect(pick(loadOrchestratorConfig(env))).toEqual(fromGateway);
  });
});
