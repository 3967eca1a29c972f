import { int, loadConfig, str, platformSpec, type ConfigOf } from '@agentrun/config';

export const projectorSpec = {
  ...platformSpec,
  PROJECTOR_HOST: str('127.0.0.1'),
  PROJECTOR_PORT: int(8083, 1, 65535),
  /** Partitions applied at once; each partition's events stay in order. */
  PROJECTOR_CONCURRENCY: int(3, 1, 64),
};
export type ProjectorConfig = ConfigOf<typeof projectorSpec>;
export const loadProjectorConfig = () => loadConfig(projectorSpec);
