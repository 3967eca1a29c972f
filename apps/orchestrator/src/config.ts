import { int, loadConfig, str, optionalStr, platformSpec, type ConfigOf } from '@agentrun/config';

export const orchestratorSpec = {
  ...platformSpec,
  ORCHESTRATOR_HOST: str('127.0.0.1'),
  ORCHESTRATOR_PORT: int(8081, 1, 65535),
  /** The model behind `callModel`: any OpenAI-compatible server (the local one by default). */
  MODEL_BASE_URL: str('http://127.0.0.1:8090/v1'),
  MODEL_API_KEY: optionalStr(),
  MODEL_NAME: str('scripted'),
  MODEL_TIMEOUT_MS: int(30_000, 100, 600_000),
  /** Commands decided at once, one per partition (a partition's commands stay in order). */
  COMMAND_CONCURRENCY: int(3, 1, 64),
  /** A workflow bundle made at build time; without it the worker bundles at start. */
  WORKFLOW_BUNDLE_PATH: optionalStr(),
};
export type OrchestratorConfig = ConfigOf<typeof orchestratorSpec>;
export const loadOrchestratorConfig = () => loadConfig(orchestratorSpec);
