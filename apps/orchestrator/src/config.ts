import { int, loadConfig, str, optionalStr, platformSpec, type ConfigOf } from '@agentrun/config';

export const orchestratorSpec = {
  ...platformSpec,
  ORCHESTRATOR_HOST: str('127.0.0.1'),
  ORCHESTRATOR_PORT: int(8081, 1, 65535),
  /** Steps one AgentRun execution takes before it continues as new. */
  AGENTRUN_STEPS_PER_EXECUTION: int(50, 1, 10_000),
  /** Commands decided at once, one per partition (a partition's commands stay in order). */
  COMMAND_CONCURRENCY: int(3, 1, 64),
  /** A workflow bundle made at build time; without it the worker bundles at start. */
  WORKFLOW_BUNDLE_PATH: optionalStr(),
};
export type OrchestratorConfig = ConfigOf<typeof orchestratorSpec>;
export const loadOrchestratorConfig = () => loadConfig(orchestratorSpec);
