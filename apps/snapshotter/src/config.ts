import { databaseSpec, quotasSpec, int, lifecycleSpec, tracingSpec, loggingSpec, modeSpec, loadServiceConfig, objectStoreSpec, str, temporalSpec, workspaceSpec, type ConfigOf, type Env } from '@agentrun/config';

/** A Temporal worker that reads workspaces and Postgres and writes the object store. */
export const snapshotterSpec = {
  ...lifecycleSpec,
  ...tracingSpec,
  ...loggingSpec,
  ...modeSpec,
  ...temporalSpec,
  ...databaseSpec,
  ...workspaceSpec,
  ...objectStoreSpec,
  // Interior captures past a run's snapshot count or bytes are skipped.
  ...quotasSpec,
  SNAPSHOTTER_HOST: str('127.0.0.1'),
  SNAPSHOTTER_PORT: int(8084, 1, 65535),
  /** Captures at once; each one is mostly disk and network bound. */
  SNAPSHOT_SLOTS: int(2, 1, 32),
  /** Simulated slowness before each capture; 0 in production. Fault tests use it to have a capture in flight. */
  SNAPSHOT_PACE_MS: int(0, 0, 600_000),
};
export type SnapshotterConfig = ConfigOf<typeof snapshotterSpec>;
export const loadSnapshotterConfig = (env?: Env) => loadServiceConfig(snapshotterSpec, env);
