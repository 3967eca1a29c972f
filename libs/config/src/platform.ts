import { bool, int, list, oneOf, optionalStr, readableFile, secret, str, type ConfigOf, type Env, type Setting } from './env';
import { temporalAddress, temporalApiKey, temporalHostVerification, temporalNamespace, temporalServerName, temporalTls, temporalTlsFile } from './temporal-profile';

/**
 * The settings the services share, in groups. Each app's spec (apps/<name>/src/config.ts) spreads only
 * the groups it uses, so a service neither validates nor can be misconfigured by a setting it ignores.
 * Name prefixes (topics, task queues) exist so tests can run isolated on one shared stack; production
 * leaves them empty.
 */

/** How every service stops. */
export const lifecycleSpec = {
  SHUTDOWN_GRACE_MS: int(20_000, 1_000, 600_000),
};

/**
 * Traces (OpenTelemetry): the standard variables this platform acts on. Exported over OTLP/HTTP only
 * when OTEL_TRACES_EXPORTER names `otlp`, or is unset and an endpoint is given; OTEL_SDK_DISABLED=true
 * turns everything off. The exporter itself also reads OTEL_EXPORTER_OTLP_HEADERS/_TIMEOUT, and the
 * resource OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (the service name is the app's by default).
 */
export const tracingSpec = {
  OTEL_SDK_DISABLED: bool(false),
  OTEL_TRACES_EXPORTER: optionalStr(),
  OTEL_EXPORTER_OTLP_ENDPOINT: optionalStr(),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: optionalStr(),
};

/**
 * Who may do what. `local` trusts the X-Org header and may listen only on loopback addresses;
 * `production` takes the org only from an API token and refuses default secrets. The code defaults
 * to `local` for a developer's machine; the image and the manifests set `production`.
 */
export const modeSpec = {
  AGENTRUN_MODE: oneOf(['local', 'production'] as const, 'local'),
};

/**
 * The server secret command keys are derived from (see deriveCommandKey in libs/persistence): read by
 * the orchestrator, which verifies signed commands, and by the token CLI, which issues keys. Changing
 * it revokes every command key at once. Unset in production mode, every command on Kafka is refused.
 */
export const commandKeySpec = {
  AGENTRUN_COMMAND_KEY_SECRET: secret(),
};

/**
 * How a service logs. `json`: one JSON object per line (time, level, service, context, msg, and on
 * lines about a run org, run_id, command_id, trace_id), what log collectors read; `text`: the same
 * records as lines a person reads. Unset: json in production mode, text in local mode (`npm start`
 * and the tests set json, so the apps' log files are JSON lines either way).
 */
export const loggingSpec = {
  LOG_FORMAT: logFormat(),
  LOG_LEVEL: oneOf(['trace', 'debug', 'info', 'warn', 'error'] as const, 'info'),
};

function logFormat(): Setting<'json' | 'text'> {
  return {
    read(env, key) {
      const fallback = env.AGENTRUN_MODE?.trim() === 'production' ? 'json' : 'text';
      return oneOf(['json', 'text'] as const, fallback).read(env, key);
    },
  };
}

/** The timing profile, and the fault points the fault suite arms (see FaultPoints; ignored outside the test profile). */
export const profileSpec = {
  AGENTRUN_PROFILE: oneOf(['production', 'test'] as const, 'production'),
  AGENTRUN_FAULTS: str(''),
};

const KAFKA_PROTOCOLS = ['PLAINTEXT', 'SSL', 'SASL_PLAINTEXT', 'SASL_SSL'] as const;
const KAFKA_MECHANISMS = ['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512', 'OAUTHBEARER'] as const;
const kafkaProtocol = oneOf(KAFKA_PROTOCOLS, 'PLAINTEXT');

function optionalOneOf<T extends string>(values: readonly T[]): Setting<T | undefined> {
  return {
    read(env, key) {
      const value = optionalStr().read(env, key);
      if (value !== undefined && !(values as readonly string[]).includes(value)) throw new Error(`${key} must be one of ${values.join(', ')}, got '${value}'`);
      return value as T | undefined;
    },
  };
}
const kafkaMechanism = optionalOneOf(KAFKA_MECHANISMS);

/** What the other Kafka security settings are checked against; undefined when it is itself invalid (reported on its own). */
function kafkaSecurityOf(env: Env): { protocol?: string; mechanism?: string; mechanismInvalid?: boolean } {
  const attempt = <T>(read: () => T): T | undefined => {
    try {
      return read();
    } catch {
      return undefined;
    }
  };
  const protocol = attempt(() => kafkaProtocol.read(env, 'KAFKA_SECURITY_PROTOCOL'));
  const mechanism = attempt(() => kafkaMechanism.read(env, 'KAFKA_SASL_MECHANISM'));
  const mechanismInvalid = mechanism === undefined && optionalStr().read(env, 'KAFKA_SASL_MECHANISM') !== undefined;
  return { protocol, mechanism: protocol?.startsWith('SASL_') ? mechanism : undefined, mechanismInvalid };
}

/**
 * A setting whose presence depends on others: `rule` returns the reason it is required (when unset)
 * or out of place (when set), so each contradiction is reported at load under the setting's own name.
 */
function kafkaDependent<T>(setting: Setting<T | undefined>, rule: (env: Env, set: boolean) => string | undefined): Setting<T | undefined> {
  return {
    read(env, key) {
      const value = setting.read(env, key);
      const problem = rule(env, value !== undefined);
      if (problem) throw new Error(`${key} ${problem}`);
      return value;
    },
  };
}

const needsSaslMechanism = (env: Env, set: boolean): string | undefined => {
  const { protocol } = kafkaSecurityOf(env);
  if (!protocol) return undefined;
  const sasl = protocol.startsWith('SASL_');
  if (sasl && !set) return `is required when KAFKA_SECURITY_PROTOCOL is ${protocol} (one of ${KAFKA_MECHANISMS.join(', ')})`;
  if (!sasl && set) return `is set but KAFKA_SECURITY_PROTOCOL is ${protocol}; use SASL_SSL or SASL_PLAINTEXT`;
  return undefined;
};

/** Required with the given mechanisms, out of place with any other (or with no SASL at all). */
const forMechanisms =
  (mechanisms: readonly string[], required: boolean) =>
  (env: Env, set: boolean): string | undefined => {
    const { protocol, mechanism, mechanismInvalid } = kafkaSecurityOf(env);
    if (!protocol || mechanismInvalid) return undefined;
    const applies = mechanism !== undefined && mechanisms.includes(mechanism);
    if (applies && required && !set) return `is required when KAFKA_SASL_MECHANISM is ${mechanism}`;
    if (!applies && set) {
      if (mechanism) return `is set but KAFKA_SASL_MECHANISM is ${mechanism}`;
      return protocol.startsWith('SASL_') ? 'is set but KAFKA_SASL_MECHANISM is not' : `is set but KAFKA_SECURITY_PROTOCOL is ${protocol}, which has no SASL`;
    }
    return undefined;
  };
const PASSWORD_MECHANISMS = ['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512'];

/** TLS files need a TLS protocol; a client certificate needs its key and the other way round. */
const forTls =
  (needs?: string) =>
  (env: Env, set: boolean): string | undefined => {
    const { protocol } = kafkaSecurityOf(env);
    if (!set || !protocol) return undefined;
    if (protocol !== 'SSL' && protocol !== 'SASL_SSL') return `is set but KAFKA_SECURITY_PROTOCOL is ${protocol}, which has no TLS; use SSL or SASL_SSL`;
    if (needs && optionalStr().read(env, needs) === undefined) return `is set but ${needs} is not`;
    return undefined;
  };

const httpUrl = (): Setting<string | undefined> => ({
  read(env, key) {
    const value = optionalStr().read(env, key);
    if (value === undefined) return undefined;
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      throw new Error(`${key} must be an http(s) URL, got '${value}'`);
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Error(`${key} must be an http(s) URL, got '${value}'`);
    return value;
  },
});

/**
 * Kafka: where the brokers are, how to authenticate, and what the topics must look like. The topic
 * settings are what `npm run topics -- apply` creates and what each service checks at startup
 * (KAFKA_TOPICS_CHECK); the defaults are a production cluster's (3 replicas, 2 in sync).
 */
export const kafkaSpec = {
  KAFKA_BROKERS: list(['127.0.0.1:9092']),
  /** Used verbatim when set (ACLs name it); `agentrun-<service>` when not. */
  KAFKA_CLIENT_ID: optionalStr(),
  /** The consumer group of the service's consumer, when not the default one (the topic prefix still applies). */
  KAFKA_GROUP_ID: optionalStr(),
  AGENTRUN_TOPIC_PREFIX: str(''),
  KAFKA_SECURITY_PROTOCOL: kafkaProtocol,
  KAFKA_SASL_MECHANISM: kafkaDependent(kafkaMechanism, needsSaslMechanism),
  KAFKA_SASL_USERNAME: kafkaDependent(optionalStr(), forMechanisms(PASSWORD_MECHANISMS, true)),
  KAFKA_SASL_PASSWORD: kafkaDependent(secret(), forMechanisms(PASSWORD_MECHANISMS, true)),
  KAFKA_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL: kafkaDependent(httpUrl(), forMechanisms(['OAUTHBEARER'], true)),
  KAFKA_SASL_OAUTHBEARER_CLIENT_ID: kafkaDependent(optionalStr(), forMechanisms(['OAUTHBEARER'], true)),
  KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET: kafkaDependent(secret(), forMechanisms(['OAUTHBEARER'], true)),
  KAFKA_SASL_OAUTHBEARER_SCOPE: kafkaDependent(optionalStr(), forMechanisms(['OAUTHBEARER'], false)),
  KAFKA_SSL_CA_FILE: kafkaDependent(readableFile(), forTls()),
  KAFKA_SSL_CERT_FILE: kafkaDependent(readableFile(), forTls('KAFKA_SSL_KEY_FILE')),
  KAFKA_SSL_KEY_FILE: kafkaDependent(readableFile(), forTls('KAFKA_SSL_CERT_FILE')),
  KAFKA_SSL_KEY_PASSWORD: kafkaDependent(secret(), forTls('KAFKA_SSL_KEY_FILE')),
  KAFKA_TOPIC_PARTITIONS: int(12, 1, 10_000),
  KAFKA_REPLICATION_FACTOR: int(3, 1, 32),
  KAFKA_MIN_INSYNC_REPLICAS: {
    read(env, key) {
      const value = int(2, 1, 32).read(env, key);
      let replicas: number | undefined;
      try {
        replicas = int(3, 1, 32).read(env, 'KAFKA_REPLICATION_FACTOR');
      } catch {
        replicas = undefined;
      }
      // More in-sync replicas than replicas would refuse every acks=all write.
      if (replicas !== undefined && value > replicas) throw new Error(`${key} (${value}) must not exceed KAFKA_REPLICATION_FACTOR (${replicas})`);
      return value;
    },
  } satisfies Setting<number>,
  /** How long the delete-policy topics keep records; -1 keeps them forever. */
  KAFKA_RETENTION_MS: int(604_800_000, -1),
  KAFKA_TOPICS_CHECK: bool(true),
  /**
   * The codec of the records this service produces. Every codec is read whatever this says; `none` by
   * default because consumers on kafkajs (outside systems included) read only gzip unless given codecs.
   */
  KAFKA_COMPRESSION: oneOf(['none', 'gzip', 'snappy', 'lz4', 'zstd'] as const, 'none'),
  /**
   * How far one fetched record batch may inflate; a batch over it is dead-lettered as `undecodable_batch`.
   * At least 8 MiB: an LZ4 block's bound is up to 4 MiB before it is inflated.
   */
  KAFKA_MAX_DECOMPRESSED_BATCH_BYTES: int(64 * 1024 * 1024, 8 * 1024 * 1024, 2 * 1024 * 1024 * 1024),
};

/**
 * Temporal, in the SDK's environment-configuration names (the CLI and every SDK read the same ones).
 * A TOML profile (TEMPORAL_CONFIG_FILE, TEMPORAL_PROFILE) may hold them instead; a variable wins over it.
 * An API key or any TLS file turns TLS on unless TEMPORAL_TLS=false says otherwise.
 */
export const temporalSpec = {
  TEMPORAL_ADDRESS: temporalAddress(),
  TEMPORAL_NAMESPACE: temporalNamespace(),
  TEMPORAL_API_KEY: temporalApiKey(),
  TEMPORAL_TLS: temporalTls(),
  TEMPORAL_TLS_SERVER_CA_CERT_PATH: temporalTlsFile('serverCACert'),
  TEMPORAL_TLS_CLIENT_CERT_PATH: temporalTlsFile('clientCert'),
  TEMPORAL_TLS_CLIENT_KEY_PATH: temporalTlsFile('clientKey'),
  TEMPORAL_TLS_SERVER_NAME: temporalServerName(),
  TEMPORAL_TLS_DISABLE_HOST_VERIFICATION: temporalHostVerification(),
  /** At startup, check that the namespace has every search attribute the workflows set. */
  TEMPORAL_CHECK_SEARCH_ATTRIBUTES: bool(true),
  AGENTRUN_TASK_QUEUE_PREFIX: str(''),
};

/** TLS toward Postgres, with libpq's meanings (see DatabaseOptions in the persistence lib). */
export const DATABASE_SSL_MODES = ['disable', 'require', 'verify-ca', 'verify-full'] as const;
export type DatabaseSslMode = (typeof DATABASE_SSL_MODES)[number];

/**
 * `auto` migrates at start under the advisory lock (a developer's machine, the tests); `check` only
 * compares the schema with this build and refuses an older one, so the runtime role needs no DDL
 * rights and no session lock goes through a pooling proxy. Unset: `check` in production mode.
 */
function migrateMode(): Setting<'auto' | 'check'> {
  return {
    read(env, key) {
      const mode = env.AGENTRUN_MODE?.trim() === 'production' ? 'check' : 'auto';
      return oneOf(['auto', 'check'] as const, mode).read(env, key);
    },
  };
}

/** Unset: whatever the URL's `sslmode` says, else `disable`. */
function sslMode(): Setting<DatabaseSslMode | undefined> {
  return { read: (env, key) => (optionalStr().read(env, key) === undefined ? undefined : oneOf(DATABASE_SSL_MODES, 'disable').read(env, key)) };
}

export const databaseSpec = {
  DATABASE_URL: str('postgres://agentrun:agentrun@127.0.0.1:5432/agentrun'),
  DATABASE_POOL_SIZE: int(10, 1, 200),
  /** Overrides the URL's password, so the URL can sit in a ConfigMap and the password in a Secret. */
  DATABASE_PASSWORD: secret(),
  DATABASE_SSLMODE: sslMode(),
  DATABASE_SSL_CA_FILE: readableFile(),
  DATABASE_SSL_CERT_FILE: readableFile(),
  DATABASE_SSL_KEY_FILE: readableFile(),
  /** Per connection; 0 turns it off. */
  DATABASE_STATEMENT_TIMEOUT_MS: int(30_000, 0, 86_400_000),
  DATABASE_MIGRATE: migrateMode(),
};

/** A workspace host's name: it becomes part of task queue names (`cpu-tools@<host>`), as in the contracts. */
function workspaceHost(): Setting<string | undefined> {
  return {
    read(env, key) {
      const value = optionalStr().read(env, key);
      if (value !== undefined && !/^[a-z0-9][a-z0-9-]{0,31}$/.test(value)) {
        throw new Error(`${key} must be 1-32 lowercase letters, digits and dashes (starting with a letter or digit), got '${value}'`);
      }
      return value;
    },
  };
}

/** Where run workspaces live on the machines that run tools and captures. */
export const workspaceSpec = {
  WORKSPACE_ROOT: str('.stack/data/workspaces'),
  /**
   * This process's workspace host. Set, workspaces are host-pinned: the process also serves the host's
   * own queues (`cpu-tools@<host>`, `snapshots@<host>`), a run that prepares its workspace here keeps
   * every later workspace activity on them (GPU tools get a staged copy on the shared GPU lane), and
   * WORKSPACE_ROOT is this host's alone. Unset, WORKSPACE_ROOT is one volume shared by every process (a
   * single-machine install). The two processes of one host (orchestrator cpu-tools, snapshotter) set
   * the same name; GPU workers ignore it.
   */
  AGENTRUN_WORKSPACE_HOST_ID: workspaceHost(),
};

export const objectStoreSpec = {
  OBJECT_STORE_DIR: str('.stack/data/objects'),
  /**
   * Objects (snapshot archives, large payloads) go to this S3 bucket when it is set, to OBJECT_STORE_DIR
   * when it is empty. Credentials come from the AWS SDK's default chain (AWS_ACCESS_KEY_ID, ...).
   */
  OBJECT_STORE_S3_BUCKET: str(''),
  /** An S3-compatible server such as MinIO (`http://minio:9000`); empty = AWS itself. */
  OBJECT_STORE_S3_ENDPOINT: str(''),
  OBJECT_STORE_S3_REGION: str('us-east-1'),
  /** `endpoint/bucket/key` addressing, which MinIO and most S3-compatible servers need. */
  OBJECT_STORE_S3_FORCE_PATH_STYLE: bool(true),
};

/** How the tool activities behave, wherever a tool lane runs (CPU tools in the orchestrator, GPU tools in the gpu-worker). */
export const toolActivitySpec = {
  /**
   * Simulated accelerator time per tool call: the tool heartbeats this many ticks of TOOL_PACE_MS
   * before it works, and a retry resumes from the last tick. 0 in production; demos and fault
   * tests use it to have a tool in flight long enough to kill.
   */
  TOOL_PACE_TICKS: int(4, 0, 1_000),
  TOOL_PACE_MS: int(0, 0, 60_000),
  /** A model reply or tool output larger than this goes to the object store; history keeps a reference. */
  AGENTRUN_PAYLOAD_INLINE_MAX_BYTES: int(128 * 1024, 1_024, 1_500_000),
};

/**
 * What every AgentRun and EvalRun is started with. Both entry points that start runs (the gateway over
 * HTTP, the orchestrator from Kafka) read this one group, and the values travel in the workflow's start
 * arguments, so the workers never read them: deployments set them once for both starters.
 */
export const runDefaultsSpec = {
  AGENTRUN_STEPS_PER_EXECUTION: int(500, 1, 100_000),
  AGENTRUN_HISTORY_MAX_EVENTS: int(2_000, 100, 50_000),
  AGENTRUN_HISTORY_MAX_BYTES: int(5 * 1024 * 1024, 64 * 1024, 50 * 1024 * 1024),
  AGENTRUN_RESEARCH_EVERY: int(4, 1, 1_000),
  AGENTRUN_TOOL_START_TO_CLOSE_S: int(60, 1, 86_400),
  AGENTRUN_TOOL_HEARTBEAT_S: int(10, 1, 3_600),
  AGENTRUN_GPU_SCHEDULE_TO_START_S: int(120, 1, 86_400),
  /** How long work on a run's workspace host may wait for it before the host counts as lost and the workspace moves. */
  AGENTRUN_HOST_SCHEDULE_TO_START_S: int(30, 1, 86_400),
  /** A run with no snapshot series, on a workspace host, still captures a recovery point every this many steps. */
  AGENTRUN_RECOVERY_EVERY_STEPS: int(10, 1, 100_000),
  /** Eval cases in flight at once per run, and how soon a cancel or a dead worker is noticed. */
  EVAL_PARALLELISM: int(4, 1, 64),
  EVAL_CASE_HEARTBEAT_S: int(5, 1, 600),
  /** Cases failed for a reason the agent did not cause are left ungraded instead of scored 0. */
  AGENTRUN_ERRORED_TURN_UNGRADED: bool(false),
  /**
   * How new runs' events leave: `carried` (each rides the run's next call on a `cpu-tools` lane, and
   * what none carries goes by a `publishRunEvents` activity), `activity` (a `publishRunEvents` activity
   * per batch), both in the history, so only events of completed tasks are published; or `workflow-task` (each task's
   * events are published by the workflow worker before the task completes: no action of their own, but
   * a task that is cut off after publishing (its worker killed, its timeout passed) runs again with
   * whatever arrived meanwhile, and can publish different events under the same seqs; benchmarks only).
   */
  AGENTRUN_RUN_EVENTS_VIA: oneOf(['carried', 'activity', 'workflow-task'] as const, 'carried'),
};

export type LifecycleConfig = ConfigOf<typeof lifecycleSpec>;
export type LoggingConfig = ConfigOf<typeof loggingSpec>;
export type ModeConfig = ConfigOf<typeof modeSpec>;
export type ProfileConfig = ConfigOf<typeof profileSpec>;
export type KafkaConfig = ConfigOf<typeof kafkaSpec>;
export type TemporalConfig = ConfigOf<typeof temporalSpec>;
export type DatabaseConfig = ConfigOf<typeof databaseSpec>;
export type WorkspaceConfig = ConfigOf<typeof workspaceSpec>;
export type ToolActivityConfig = ConfigOf<typeof toolActivitySpec>;
export type RunDefaultsConfig = ConfigOf<typeof runDefaultsSpec>;

/** Timeouts that fault tests must not wait out: the test profile shortens them. */
export function kafkaTimings(config: Pick<ProfileConfig, 'AGENTRUN_PROFILE'>) {
  return config.AGENTRUN_PROFILE === 'test'
    ? { sessionTimeout: 8_000, heartbeatInterval: 1_000, rebalanceTimeout: 10_000 }
    : { sessionTimeout: 30_000, heartbeatInterval: 3_000, rebalanceTimeout: 60_000 };
}
