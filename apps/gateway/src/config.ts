import { bool, modelEndpointNamesSpec, quotasSpec, databaseSpec, DEVELOPMENT_CURSOR_SECRET, secret, loadServiceConfig, int, kafkaSpec, lifecycleSpec, tracingSpec, loggingSpec, modeSpec, objectStoreSpec, profileSpec, runDefaultsSpec, str, temporalSpec, type ConfigOf, type Env, type Setting } from '@agentrun/config';
import { hostName } from './web-security';

/**
 * Host names, comma-separated, each checked and normalised as the Host allow-list compares them. A
 * port is refused rather than ignored: the list names hosts, and any port of a listed host is allowed.
 */
function hostNames(): Setting<string[]> {
  return {
    read(env, key) {
      const entries = (env[key] ?? '').split(',').map((s) => s.trim()).filter(Boolean);
      const bad = entries.filter((entry) => hostName(entry) === undefined);
      if (bad.length) {
        throw new Error(`${key} must list host names (e.g. agentrun.example.com, 10.0.0.5, [::1]) without ports or schemes; not ${bad.map((b) => `'${b}'`).join(', ')}`);
      }
      return [...new Set(entries.map((entry) => hostName(entry) as string))];
    },
  };
}

export const gatewaySpec = {
  ...lifecycleSpec,
  ...tracingSpec,
  ...loggingSpec,
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
  // Starts and streams are held to each org's quotas.
  ...quotasSpec,
  GATEWAY_PORT: int(8080, 1, 65535),
  GATEWAY_HOST: str('127.0.0.1'),
  /**
   * The names clients reach the gateway by (its Host header, any port); a request naming another is a
   * 421, so a web page that rebinds its own name to the gateway's address gets nothing. Local mode
   * always allows localhost, 127.0.0.1 and [::1] besides these; production mode needs at least one.
   */
  GATEWAY_ALLOWED_HOSTS: hostNames(),
  /**
   * The gateway is behind a reverse proxy that terminates TLS and sets X-Forwarded-Proto: the scheme
   * of its own origin (checked against a cookie-signed write's Origin) and the session cookie's Secure
   * attribute then follow that header. Only set it when clients cannot reach the gateway around the proxy.
   */
  GATEWAY_TRUST_PROXY: bool(false),
  /** A browser session (POST /session) ends after this many seconds without a request. */
  GATEWAY_SESSION_IDLE_SECONDS: int(1800, 1, 86_400),
  /** A browser session ends this many seconds after sign-in, however busy. */
  GATEWAY_SESSION_MAX_SECONDS: int(43_200, 1, 2_592_000),
  /** Signs list cursors so a tampered one is refused; set it per deployment. */
  CURSOR_SECRET: secret(DEVELOPMENT_CURSOR_SECRET),
  /** Seconds between SSE keepalive comments. */
  SSE_KEEPALIVE_SECONDS: int(15, 1, 300),
  /**
   * SSE streams this gateway holds open at once, every org together; past it a new stream is a 503
   * (the gateway is full, not the org over its quota, which is a 429). Each stream holds a socket and
   * shares the database pool's reads, so this bounds what one gateway process takes on.
   */
  GATEWAY_SSE_MAX_STREAMS: int(1_000, 1, 1_000_000),
  /** The largest file GET /runs/{id}/snapshots/{snapshot_id}/files/{path} serves (bytes); a larger one is a 413 naming its size. */
  SNAPSHOT_FILE_MAX_BYTES: int(10 * 1024 * 1024, 1, 2 * 1024 ** 3),
  /** Events shown with a run by GET /runs/{id}. */
  RUN_LAST_EVENTS: int(20, 1, 500),
};
export type GatewayConfig = ConfigOf<typeof gatewaySpec>;
export const loadGatewayConfig = (env?: Env) => loadServiceConfig(gatewaySpec, env);
