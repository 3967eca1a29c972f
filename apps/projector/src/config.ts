import { databaseSpec, eventSigningSpec, int, kafkaSpec, lifecycleSpec, tracingSpec, loggingSpec, modeSpec, loadServiceConfig, profileSpec, str, type ConfigOf, type Env } from '@agentrun/config';

/** Kafka in, Postgres out: nothing of Temporal, tools or evaluations. */
export const projectorSpec = {
  ...lifecycleSpec,
  ...tracingSpec,
  ...loggingSpec,
  ...modeSpec,
  ...profileSpec,
  ...kafkaSpec,
  ...databaseSpec,
  // Every run event is verified against these keys before it is read.
  ...eventSigningSpec,
  PROJECTOR_HOST: str('127.0.0.1'),
  PROJECTOR_PORT: int(8083, 1, 65535),
  /** Partitions applied at once; each partition's events stay in order. */
  PROJECTOR_CONCURRENCY: int(3, 1, 64),
};
export type ProjectorConfig = ConfigOf<typeof projectorSpec>;
export const loadProjectorConfig = (env?: Env) => loadServiceConfig(projectorSpec, env);
