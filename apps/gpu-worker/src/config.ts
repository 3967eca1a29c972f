import { databaseSpec, eventSigningSpec, int, kafkaSpec, profileSpec, lifecycleSpec, tracingSpec, loggingSpec, modeSpec, modelEndpointSpec, loadServiceConfig, modelPricesSpec, objectStoreSpec, str, temporalSpec, toolActivitySpec, workspaceSpec, type ConfigOf, type Env } from '@agentrun/config';

/**
 * A Temporal worker with Postgres for its ledgers, and Kafka for the run events its `gpu-tools` calls
 * carry (published, signed, as the orchestrator publishes them); no run defaults (they arrive in each
 * workflow's input).
 */
export const gpuWorkerSpec = {
  ...lifecycleSpec,
  ...tracingSpec,
  ...loggingSpec,
  ...modeSpec,
  ...profileSpec,
  ...temporalSpec,
  ...databaseSpec,
  ...kafkaSpec,
  // Every run event it publishes is signed; production refuses to start without keys.
  ...eventSigningSpec,
  ...workspaceSpec,
  // Large tool outputs are offloaded here.
  ...objectStoreSpec,
  ...toolActivitySpec,
  GPU_WORKER_HOST: str('127.0.0.1'),
  GPU_WORKER_PORT: int(8082, 1, 65535),
  /** Activities this worker runs at once: the GPU slots it has. */
  GPU_SLOTS: int(2, 1, 64),
  /** Eval cases this worker runs at once on the `gpu-eval` lane. */
  EVAL_SLOTS: int(4, 1, 256),
  /** One case's GPU time: CASE_TICKS heartbeating ticks of CASE_TICK_MS. */
  CASE_TICKS: int(4, 1, 1_000),
  CASE_TICK_MS: int(250, 0, 60_000),
  /** Chance of a transient GPU error per case attempt, in thousandths (retried by policy). */
  CASE_HICCUP_PER_MILLE: int(100, 0, 1_000),
  /** Real evals: the endpoints they may name, one model call's time limit, and the default answer length. */
  ...modelEndpointSpec,
  EVAL_MODEL_TIMEOUT_MS: int(60_000, 100, 600_000),
  EVAL_MAX_TOKENS: int(256, 1, 32_768),
  // What eval cases' model calls cost (their results' usage, and what their eval's budget reserves).
  ...modelPricesSpec,
};
export type GpuWorkerConfig = ConfigOf<typeof gpuWorkerSpec>;
export const loadGpuWorkerConfig = (env?: Env) => loadServiceConfig(gpuWorkerSpec, env);
