import { modelEndpointNamesSpec, databaseSpec, DEVELOPMENT_CURSOR_SECRET, secret, loadServiceConfig, int, kafkaSpec, lifecycleSpec, modeSpec, objectStoreSpec, profileSpec, runDefaultsSpec, str, temporalSpec, type ConfigOf, type Env } from '@agentrun/config';

export const gatewaySpec = {
  ...lifecycleSpec,
  ...modeSpec,
  ...profileSpec,
  ...kafkaSpec,
  ...temporalSpec,
  ...databaseSpec,
  // Snapshot archives are served from here.
  ...objectStoreSpec,
  ...modelEndpointNamesSpec,
  // HTTP commands start runs, so the gateway reads the same run defaults as the orchestrator.
  ...runDefaultsSpec,
  GATEWAY_PORT: int(8080, 1, 65535),
  GATEWAY_HOST: str('127.0.0.1'),
  /** Signs list cursors so a tampered one is refused; set it per deployment. */
  CURSOR_SECRET: secret(DEVELOPMENT_CURSOR_SECRET),
  /** Seconds between SSE keepalive comments. */
  SSE_KEEPALIVE_SECONDS: int(15, 1, 300),
  /** Events shown with a run by GET /runs/{id}. */
  RUN_LAST_EVENTS: int(20, 1, 500),
};
export type GatewayConfig = ConfigOf<typeof gatewaySpec>;
export const loadGatewayConfig = (env?: Env) => loadServiceConfig(gatewaySpec, env);
