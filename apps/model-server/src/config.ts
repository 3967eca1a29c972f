import { int, loadConfig, str, type ConfigOf, type Env } from '@agentrun/config';

/** The model server talks to nothing: it needs only where to listen. */
export const modelServerSpec = {
  /** 0 picks a free port. */
  MODEL_SERVER_PORT: int(8090, 0, 65535),
  MODEL_SERVER_HOST: str('127.0.0.1'),
};
export type ModelServerConfig = ConfigOf<typeof modelServerSpec>;
export const loadModelServerConfig = (env?: Env) => loadConfig(modelServerSpec, env);
