import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createWriteStream, existsSync, mkdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client as PgClient } from 'pg';
import { Kafka, logLevel, type Consumer, type Producer } from 'kafkajs';
import { TOPICS, isTerminal } from '@agentrun/contracts';
import { startModelServer, type ModelServer } from '../../apps/model-server/src/model-server';
import { DEVELOPMENT_EVENT_KEY, parseEventKeys, type EventKey } from '@agentrun/config';
import { EventSigner, installRequestQueueFix, platformTopicSpecs, type TopicSpecSettings } from '@agentrun/kafka';
import { kafkaClientOfProperties, pgClientOf, secureStack, type SecureStack } from './secure-stack';
import { REPO_ROOT, stackEnv, stackUrls } from './stack-env';
import { Settled, waitFor } from './wait';

export const APPS = ['gateway', 'orchestrator', 'gpu-worker', 'projector', 'snapshotter'] as const;
export type AppName = (typeof APPS)[number];
/** The apps of one workspace host: what touches run workspaces (GPU tools get a staged copy, so the gpu-worker is shared). */
export const HOST_APPS = ['orchestrator', 'snapshotter'] as const;
/** An app, or one workspace host's copy of it (`snapshotter@h1`). */
export type Instance = AppName | `${(typeof HOST_APPS)[number]}@${string}`;

function appOf(instance: Instance): AppName {
  return instance.split('@')[0] as AppName;
}

function hostOf(instance: Instance): string | undefined {
  return instance.includes('@') ? instance.split('@')[1] : undefined;
}

const PORT_VARIABLE: Record<AppName, string> = {
  gateway: 'GATEWAY_PORT',
  orchestrator: 'ORCHESTRATOR_PORT',
  'gpu-worker': 'GPU_WORKER_PORT',
  projector: 'PROJECTOR_PORT',
  snapshotter: 'SNAPSHOTTER_PORT',
};

/** Runs `npm run migrate`'s entry against one database (the DATABASE_* settings given); its output is the error when it fails. */
async function migrateDatabase(settings: Record<string, string>): Promise<void> {
  try {
    await promisify(execFile)(process.execPath, [join(REPO_ROOT, 'tools/migrate.js')], { env: { PATH: process.env.PATH ?? '', ...settings } });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`npm run migrate failed: ${e.stderr || e.stdout || e.message}`);
  }
}

/** A port nothing listens on right now. */
export async function freePort(): Promise<number> {
  return (await freePorts(1))[0];
}

/**
 * Ports handed out below the kernel's ephemeral range (32768 and up on Linux): a port the kernel picked
 * for listen(0) and that was then closed may be taken by the very next outbound connection (a Kafka,
 * Postgres or Temporal client of any process), and the app given it fails with EADDRINUSE. Below the
 * range only another listener can take it (the compose profile publishes 2xxxx ports, so not there).
 * Jest workers run files side by side (tests/run.sh's parallel pass), and a port one worker found free
 * may be bound by another worker's app a moment later, so each worker hands out ports from a slice of
 * its own (by JEST_WORKER_ID), starting at a random point in it.
 */
const PORT_SLICE = 1_000;
const PORT_SLICES = 8;
// The tests' own Kafka clients (producers, followers) without kafkajs's idle 1 ms request-queue loop.
installRequestQueueFix();

const worker = Math.max(1, Number(process.env.JEST_WORKER_ID ?? 1));
const PORT_FLOOR = 11_000 + ((worker - 1) % PORT_SLICES) * PORT_SLICE;
const PORT_CEILING = PORT_FLOOR + PORT_SLICE;
let nextPort = PORT_FLOOR + Math.floor(Math.random() * (PORT_CEILING - PORT_FLOOR));
const handedOut = new Set<number>();

function listenable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** `count` distinct ports that nothing listens on now and that this process has not handed out before. */
export async function freePorts(count: number): Promise<number[]> {
  const ports: number[] = [];
  for (let tried = 0; ports.length < count; tried++) {
    if (tried > PORT_CEILING - PORT_FLOOR) throw new Error(`no ${count} free ports between ${PORT_FLOOR} and ${PORT_CEILING}`);
    const port = nextPort;
    nextPort = nextPort + 1 >= PORT_CEILING ? PORT_FLOOR : nextPort + 1;
    if (handedOut.has(port) || !(await listenable(port))) continue;
    handedOut.add(port);
    ports.push(port);
  }
  return ports;
}

/** The last `lines` lines of a log file ('' when it is missing). */
async function logTail(file: string, lines: number): Promise<string> {
  const text = await readFile(file, 'utf8').catch(() => '');
  return text.trimEnd().split('\n').slice(-lines).join('\n');
}

export interface TopicRecord<T = unknown> {
  partition: number;
  offset: string;
  key: string | null;
  value: T;
  /** The record's headers as text. */
  headers: Record<string, string>;
  /** The value's bytes as they were on the topic (what a signature covers). */
  bytes: Buffer;
}

/** Runs a connected consumer over `topic` from the beginning; the returned array fills as records arrive (JSON parsed when it is JSON). */
export async function followInto<T>(consumer: Consumer, topic: string): Promise<TopicRecord<T>[]> {
  const records: TopicRecord<T>[] = [];
  // The follower reads at least once too: after a rebalance or a restart of its own (a jest worker busy
  // past its session timeout) it reads again what it had not committed. A record is its position, so
  // one read twice is kept once; a record the platform wrote twice has two positions and stays two.
  const seen = new Set<string>();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({
    eachMessage: async ({ partition, message }) => {
      const position = `${partition}@${message.offset}`;
      if (seen.has(position)) return;
      seen.add(position);
      const text = message.value?.toString('utf8') ?? '';
      let value: unknown = text;
      try {
        value = JSON.parse(text);
      } catch {
        // not JSON: keep the text
      }
      const headers = Object.fromEntries(Object.entries(message.headers ?? {}).map(([name, v]) => [name, String(Array.isArray(v) ? v[0] : v)]));
      records.push({ partition, offset: message.offset, key: message.key?.toString('utf8') ?? null, value: value as T, headers, bytes: message.value ?? Buffer.alloc(0) });
    },
  });
  return records;
}

export interface PlatformOptions {
  /**
   * On the stack's secure profile: the services take their settings from .stack/secure (SASL_SSL Kafka
   * as their own principals, Temporal over mTLS, Postgres with verify-full), the test's Kafka client is
   * the `outside` principal, and topics are the unprefixed ones the stack made, since the ACLs name them.
   */
  secure?: boolean;
  /**
   * Workspace hosts: each runs its own orchestrator (cpu-tools role only) and snapshotter with
   * AGENTRUN_WORKSPACE_HOST_ID set and a workspace root of its own (`<dataDir>/hosts/<host>/workspaces`);
   * the main orchestrator keeps the commands and workflows roles, one gpu-worker serves every host (GPU
   * tools get the workspace staged), and no unhosted snapshotter runs. The object store stays one
   * directory (it stands in for S3).
   */
  hosts?: string[];
}

/**
 * One isolated copy of the platform on the shared stack: its own topics (prefixed), task queues
 * (prefixed), database and workspace, and the five apps as real child processes from built output.
 */
export class Platform {
  readonly id = `t${randomBytes(4).toString('hex')}`;
  /** Task queues (and, on the plain stack, topics and groups) start with this. */
  readonly prefix = `${this.id}.`;
  readonly topicPrefix: string;
  private readonly secure?: SecureStack;
  readonly database = `agentrun_${this.id}`;
  readonly ports = {} as Record<AppName, number> & Record<string, number>;
  readonly kafka: Kafka;
  readonly hosts: string[];
  private readonly processes = new Map<Instance, ChildProcess>();
  private readonly exits = new Map<Instance, Promise<number | null>>();
  private producer?: Producer;
  private readonly consumers: Consumer[] = [];
  private readonly urls = stackUrls();
  readonly dataDir: string;
  db?: PgClient;
  /** The deterministic OpenAI-compatible model server the orchestrator calls. */
  model?: ModelServer;

  /**
   * The key the services sign and verify run events with: AGENTRUN_EVENT_KEYS if the test sets it, a
   * fresh one in production mode (which refuses the development key), else the development key.
   */
  readonly eventKey: EventKey;

  /** Settings for one app only, applied the next time it starts (e.g. a slower snapshotter). */
  readonly appEnv: Partial<Record<Instance, Record<string, string>>> = {};

  constructor(
    private readonly extraEnv: Record<string, string> = {},
    options: PlatformOptions = {},
  ) {
    this.secure = options.secure ? secureStack() : undefined;
    this.hosts = options.hosts ?? [];
    this.topicPrefix = this.secure ? '' : this.prefix;
    this.kafka = this.secure
      ? new Kafka({ ...kafkaClientOfProperties(this.secure.outside, `outside-e2e-${this.id}`), logLevel: logLevel.NOTHING })
      : new Kafka({ clientId: `e2e-${this.id}`, brokers: this.urls.kafkaBrokers, logLevel: logLevel.NOTHING });
    this.dataDir = join(REPO_ROOT, '.stack', 'test-runs', this.id);
    const given = this.extraEnv.AGENTRUN_EVENT_KEYS;
    this.eventKey = given ? parseEventKeys(given)[0] : this.production ? { kid: this.id, secret: Buffer.from(randomBytes(32).toString('hex')) } : DEVELOPMENT_EVENT_KEY;
  }

  topic(name: string): string {
    return this.topicPrefix + name;
  }

  /** The topics the test platform makes for itself on the plain stack: the declared specs on one broker. */
  private topicSettings(): TopicSpecSettings {
    const stack = stackEnv();
    return {
      KAFKA_TOPIC_PARTITIONS: Math.max(3, Number(stack.KAFKA_TOPIC_PARTITIONS ?? 3)),
      KAFKA_REPLICATION_FACTOR: 1,
      KAFKA_MIN_INSYNC_REPLICAS: 1,
      KAFKA_RETENTION_MS: Number(stack.KAFKA_RETENTION_MS ?? 604_800_000),
    };
  }

  /** True when the services run in production mode, which refuses the development secrets. */
  private get production(): boolean {
    return this.extraEnv.AGENTRUN_MODE === 'production';
  }

  /** The orchestrator's AGENTRUN_COMMAND_KEY_SECRET in production mode: the token CLI needs the same to issue command keys. */
  readonly commandKeySecret = `command-keys-${randomBytes(24).toString('hex')}`;

  /** The services' own database role in production mode (the stack's role has the development password). */
  private readonly serviceRole = { user: `agentrun_${this.id}`, password: randomBytes(12).toString('hex') };

  /** The DATABASE_* settings of the services, for `database` (the stack's own by default). */
  private databaseSettings(database?: string): Record<string, string> {
    if (!this.secure && this.production) {
      const url = new URL(this.urls.databaseUrl(database));
      url.username = this.serviceRole.user;
      url.password = this.serviceRole.password;
      return { DATABASE_URL: url.toString() };
    }
    if (!this.secure) return { DATABASE_URL: this.urls.databaseUrl(database) };
    const url = new URL(this.secure.platform.DATABASE_URL);
    if (database) url.pathname = `/${database}`;
    const { DATABASE_SSLMODE, DATABASE_SSL_CA_FILE, DATABASE_PASSWORD_FILE } = this.secure.platform;
    return { DATABASE_URL: url.toString(), DATABASE_SSLMODE, DATABASE_SSL_CA_FILE, DATABASE_PASSWORD_FILE };
  }

  private pgClient(database?: string): PgClient {
    const client = new PgClient(this.secure ? pgClientOf(this.secure.platform, database) : { connectionString: this.urls.databaseUrl(database) });
    // A test that restarts Postgres ends this connection while it is idle; it then calls reconnectDb,
    // and a query on the dead connection still fails the test. Without a listener the event would
    // crash the test run instead.
    client.on('error', () => undefined);
    return client;
  }

  get gatewayUrl(): string {
    return `http://127.0.0.1:${this.ports.gateway}`;
  }

  async start(): Promise<void> {
    mkdirSync(join(this.dataDir, 'logs'), { recursive: true });
    const admin = this.pgClient();
    await admin.connect();
    if (!this.secure && this.production) {
      // A role of its own, owning the database: production mode refuses the stack role's development password.
      // The stack's role joins it, so the test's own connection reads what the services write.
      await admin.query(`CREATE ROLE ${this.serviceRole.user} LOGIN PASSWORD '${this.serviceRole.password}'`);
      await admin.query(`GRANT ${this.serviceRole.user} TO CURRENT_USER`);
      await admin.query(`CREATE DATABASE ${this.database} OWNER ${this.serviceRole.user}`);
    } else {
      await admin.query(`CREATE DATABASE ${this.database}`);
    }
    await admin.end();
    // As a deployment does it: migrations are their own step, so services in production mode (which
    // only check the schema) find it current.
    await migrateDatabase(this.databaseSettings(this.database));
    this.db = this.pgClient(this.database);
    await this.db.connect();

    // On the secure profile the stack made the (unprefixed) topics, and `outside` may not create any.
    if (!this.secure) {
      const kafkaAdmin = this.kafka.admin();
      await kafkaAdmin.connect();
      const topics = platformTopicSpecs(this.topicSettings(), this.topicPrefix).map((spec) => ({
        topic: spec.name,
        numPartitions: spec.partitions,
        replicationFactor: spec.replicationFactor,
        configEntries: Object.entries(spec.configs).map(([name, value]) => ({ name, value })),
      }));
      // A broker that has just started may not have every new partition's leader at once; creating
      // again is harmless (existing topics are left as they are).
      await waitFor('the test topics and their leaders', async () => {
        await kafkaAdmin.createTopics({ waitForLeaders: true, topics });
        return true;
      }, 60_000, 500);
      await kafkaAdmin.disconnect();
    }

    this.model = await startModelServer({ port: 0 });
    const instances = this.instances();
    const ports = await freePorts(instances.length);
    instances.forEach((instance, i) => (this.ports[instance] = ports[i]));
    await Promise.all(this.instances().map((instance) => this.startApp(instance)));
  }

  /** The processes this platform runs: the five apps, or with workspace hosts each host's own three. */
  instances(): Instance[] {
    if (this.hosts.length === 0) return [...APPS];
    return ['gateway', 'projector', 'orchestrator', 'gpu-worker', ...this.hosts.flatMap((h) => HOST_APPS.map((app): Instance => `${app}@${h}`))];
  }

  /** A workspace host's own workspace root. */
  workspaceRoot(host?: string): string {
    return host ? join(this.dataDir, 'hosts', host, 'workspaces') : join(this.dataDir, 'workspaces');
  }

  env(instance: Instance): Record<string, string> {
    const app = appOf(instance);
    const host = hostOf(instance);
    const hosted = this.hosts.length > 0;
    return {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/root',
      AGENTRUN_MODE: 'local',
      AGENTRUN_PROFILE: 'test',
      // The service logs (dataDir/logs/<app>.log) are JSON lines, as under `npm start`.
      LOG_FORMAT: 'json',
      // Production mode refuses the development cursor secret, and needs the names the gateway answers to.
      // Commands on Kafka are verified against keys derived from AGENTRUN_COMMAND_KEY_SECRET; run events
      // are signed with this platform's own key.
      ...(this.production
        ? {
            CURSOR_SECRET: `cursor-${this.id}-${this.serviceRole.password}`,
            GATEWAY_ALLOWED_HOSTS: '127.0.0.1,localhost',
            AGENTRUN_COMMAND_KEY_SECRET: this.commandKeySecret,
            AGENTRUN_EVENT_KEYS: `${this.eventKey.kid}:${this.eventKey.secret.toString()}`,
          }
        : {}),
      KAFKA_BROKERS: this.urls.kafkaBrokers.join(','),
      AGENTRUN_TOPIC_PREFIX: this.topicPrefix,
      ...Object.fromEntries(Object.entries(this.topicSettings()).map(([key, value]) => [key, String(value)])),
      TEMPORAL_ADDRESS: this.urls.temporalAddress,
      TEMPORAL_NAMESPACE: this.urls.namespace,
      AGENTRUN_TASK_QUEUE_PREFIX: this.prefix,
      // What the secure profile wrote: Kafka, Temporal and Postgres as each service reaches them there.
      ...(this.secure ? { ...this.secure.platform, ...this.secure.service(app) } : {}),
      ...this.databaseSettings(this.database),
      DATABASE_POOL_SIZE: '5',
      WORKSPACE_ROOT: this.workspaceRoot(host),
      ...(host ? { AGENTRUN_WORKSPACE_HOST_ID: host } : {}),
      ...(hosted && app === 'orchestrator' ? { ORCHESTRATOR_ROLES: host ? 'cpu-tools' : 'commands,workflows' } : {}),
      OBJECT_STORE_DIR: join(this.dataDir, 'objects'),
      WORKFLOW_BUNDLE_PATH: join(REPO_ROOT, 'libs/workflows/dist/workflow-bundle.js'),
      SHUTDOWN_GRACE_MS: '20000',
      MODEL_BASE_URL: this.model?.url ?? '',
      MODEL_NAME: 'scripted',
      MODEL_TIMEOUT_MS: '5000',
      [PORT_VARIABLE[app]]: String(this.ports[instance]),
      ...this.extraEnv,
      ...(this.appEnv[instance] ?? {}),
    };
  }

  /** Starts an app and waits until it is ready (unless `ready: false`: a fault point may kill it first). */
  async startApp(app: Instance, options: { ready?: boolean; portRetries?: number } = {}): Promise<void> {
    const main = join(REPO_ROOT, 'apps', appOf(app), 'dist', 'main.js');
    if (!existsSync(main)) throw new Error(`${main} is missing: run npm run build first`);
    const log = createWriteStream(join(this.dataDir, 'logs', `${app}.log`), { flags: 'a' });
    // AGENTRUN_TEST_CPU_PROF_DIR=dir: every app writes a V8 CPU profile there when it exits (node --cpu-prof).
    const profile = process.env.AGENTRUN_TEST_CPU_PROF_DIR;
    const child = spawn(process.execPath, [...(profile ? ['--cpu-prof', `--cpu-prof-dir=${profile}`] : []), main], { env: this.env(app), stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout?.pipe(log, { end: false });
    child.stderr?.pipe(log, { end: false });
    this.processes.set(app, child);
    this.exits.set(
      app,
      new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? (signal ? -1 : null)))),
    );
    const logFile = join(this.dataDir, 'logs', `${app}.log`);
    if (options.ready === false) return;
    const state = await waitFor(`${app} to be ready (log: ${logFile})`, async () => {
      if (child.exitCode !== null || child.signalCode !== null) return 'exited';
      const res = await fetch(`http://127.0.0.1:${this.ports[app]}/readyz`);
      return res.status === 200 && 'ready';
    }, 90_000, 200);
    if (state !== 'exited') return;
    await this.exits.get(app);
    // Its last output may still be in the pipes when it exits: until they close, or 2 s at most.
    if (child.stdout && !child.stdout.readableEnded) await Promise.race([once(child, 'close'), new Promise((resolve) => setTimeout(resolve, 2_000).unref())]);
    const tail = await logTail(logFile, 20);
    // Another listener took the port between its choice and the app's listen: a new port, once more.
    if (/EADDRINUSE/.test(tail) && (options.portRetries ?? 2) > 0) {
      this.ports[app] = (await freePorts(1))[0];
      return this.startApp(app, { ...options, portRetries: (options.portRetries ?? 2) - 1 });
    }
    throw new Error(`${app} exited with ${child.exitCode ?? child.signalCode} while starting (log: ${logFile}); its last lines:\n${tail}`);
  }

  /** Sends `signal` to an app and waits for it to exit; returns its exit code (-1 when killed by a signal). */
  async stopApp(app: Instance, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
    const child = this.processes.get(app);
    if (!child || child.exitCode !== null || child.signalCode !== null) return child?.exitCode ?? null;
    child.kill(signal);
    const code = await this.exits.get(app);
    this.processes.delete(app);
    return code ?? null;
  }

  /** Stops every process of one workspace host (kill -9 with SIGKILL: the host is lost). */
  async stopHost(host: string, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    await Promise.all(HOST_APPS.map((app) => this.stopApp(`${app}@${host}`, signal)));
  }

  /** Starts a workspace host's processes again. */
  async startHost(host: string): Promise<void> {
    await Promise.all(HOST_APPS.map((app) => this.startApp(`${app}@${host}`)));
  }

  /** The process id of a running app. */
  pidOf(app: Instance): number {
    const pid = this.processes.get(app)?.pid;
    if (pid === undefined) throw new Error(`${app} is not running`);
    return pid;
  }

  /** Waits for an app to exit on its own (a fault point killed it); returns its exit code, -1 for a signal. */
  async exited(app: Instance): Promise<number | null> {
    const code = await this.exits.get(app);
    this.processes.delete(app);
    return code ?? null;
  }

  async stop(): Promise<void> {
    for (const consumer of this.consumers) await consumer.disconnect().catch(() => undefined);
    await this.producer?.disconnect().catch(() => undefined);
    await Promise.all(this.instances().map((app) => this.stopApp(app)));
    await this.db?.end().catch(() => undefined);
    await this.model?.close();
    if (process.env.AGENTRUN_KEEP_TEST_DATA !== '1') await this.dropData();
  }

  /**
   * The platform's topics and database, dropped once its apps are down (its logs stay under dataDir).
   * Files run side by side and the stack serves some fifty platforms a run: left behind, their
   * partitions would make every broker restart of the exclusive pass load a thousand of them.
   * AGENTRUN_KEEP_TEST_DATA=1 keeps both for a look afterwards. Best effort: a stack that a test left
   * down is not an error here.
   */
  private async dropData(): Promise<void> {
    if (!this.secure) {
      const admin = this.kafka.admin();
      try {
        await admin.connect();
        const mine = (await admin.listTopics()).filter((topic) => topic.startsWith(this.topicPrefix));
        if (mine.length > 0) await admin.deleteTopics({ topics: mine, timeout: 10_000 });
      } catch {
        // left for the stack's next start to carry
      } finally {
        await admin.disconnect().catch(() => undefined);
      }
    }
    const pg = this.pgClient();
    try {
      await pg.connect();
      await pg.query(`DROP DATABASE IF EXISTS ${this.database} WITH (FORCE)`);
    } catch {
      // as above
    } finally {
      await pg.end().catch(() => undefined);
    }
  }

  /** Publishes raw values to the commands topic with a plain kafkajs producer, as an outside system would. */
  async publishCommands(messages: { key: string; value: string | Buffer; headers?: Record<string, string> }[]): Promise<void> {
    if (!this.producer) {
      this.producer = this.kafka.producer({ allowAutoTopicCreation: false });
      await this.producer.connect();
    }
    await this.producer.send({ topic: this.topic(TOPICS.commands), messages });
  }

  /**
   * Publishes raw values to the run-events topic, as the publish activity would: each signed with
   * `key` (the platform's own by default; `null` sends them unsigned, as a forger without the key would).
   */
  async publishRunEvents(messages: { key: string; value: string | Buffer }[], key: EventKey | null = this.eventKey): Promise<void> {
    if (!this.producer) {
      this.producer = this.kafka.producer({ allowAutoTopicCreation: false });
      await this.producer.connect();
    }
    const signer = key && new EventSigner(key);
    await this.producer.send({ topic: this.topic(TOPICS.runEvents), messages: messages.map((m) => ({ ...m, headers: signer ? signer.headers(m.value) : {} })) });
  }

  async publishCommand(command: Record<string, unknown> & { run_id: string }): Promise<void> {
    await this.publishCommands([{ key: command.run_id, value: JSON.stringify(command) }]);
  }

  /** Follows a topic from the beginning; the returned array fills as records arrive. */
  async follow<T = Record<string, unknown>>(topicName: string): Promise<TopicRecord<T>[]> {
    // `outside` may join only groups named outside-*.
    const consumer = this.kafka.consumer({ groupId: `${this.secure ? 'outside-' : ''}${this.id}-follow-${randomBytes(3).toString('hex')}` });
    this.consumers.push(consumer);
    await consumer.connect();
    return followInto<T>(consumer, this.topic(topicName));
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read arbitrary JSON bodies field by field
  async http(method: string, path: string, options: { org?: string; body?: unknown; headers?: Record<string, string> } = {}): Promise<{ status: number; body: any; headers: Headers }> {
    const headers: Record<string, string> = { ...(options.headers ?? {}) };
    if (options.org) headers['X-Org'] = options.org;
    let body: string | undefined;
    if (options.body !== undefined) {
      headers['Content-Type'] = 'application/json';
      body = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
    }
    const res = await fetch(this.gatewayUrl + path, { method, headers, body });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // keep the text
    }
    return { status: res.status, body: parsed, headers: res.headers };
  }

  /** A new test connection, e.g. after Postgres restarted. */
  async reconnectDb(): Promise<void> {
    await this.db?.end().catch(() => undefined);
    this.db = this.pgClient(this.database);
    await this.db.connect();
  }

  async query<T = Record<string, unknown>>(sql: string, params: unknown[] = []): Promise<T[]> {
    const result = await this.db!.query(sql, params);
    return result.rows as T[];
  }

  /** The run's status in the read model; undefined before its first event is projected. */
  async statusOf(org: string, runId: string): Promise<string | undefined> {
    const rows = await this.query<{ status: string }>('SELECT status FROM runs WHERE org = $1 AND run_id = $2', [org, runId]);
    return rows[0]?.status;
  }

  /**
   * Waits until the run's status in the read model is `status`. A run that reaches another terminal
   * status cannot get there any more: the wait fails at once, with the reason the run gave.
   */
  async waitForStatus(org: string, runId: string, status: string, timeoutMs = 120_000): Promise<void> {
    await waitFor(`run ${org}/${runId} to be ${status}`, async () => {
      const rows = await this.query<{ status: string; state: { reason?: string; message?: string } }>('SELECT status, state FROM runs WHERE org = $1 AND run_id = $2', [org, runId]);
      const now = rows[0];
      if (now?.status === status) return true;
      if (now && isTerminal(now.status)) {
        throw new Settled(`run ${org}/${runId} ended ${now.status} (${now.state.reason ?? 'no reason'}: ${now.state.message ?? 'no message'}) while the test waited for ${status}`);
      }
      return false;
    }, timeoutMs, 100);
  }

  /**
   * Holds a run mid-run: pauses it over HTTP and waits until the read model shows it paused, so a
   * test's fault or stream is in place before the run's next step however fast its steps are.
   */
  async holdRun(org: string, runId: string): Promise<void> {
    await this.control(org, runId, 'pause');
    await this.waitForStatus(org, runId, 'paused');
  }

  /** Lets a held run go on. */
  async releaseRun(org: string, runId: string): Promise<void> {
    await this.control(org, runId, 'resume');
  }

  private async control(org: string, runId: string, action: 'pause' | 'resume'): Promise<void> {
    const res = await this.http('POST', `/runs/${runId}/${action}`, { org });
    if (res.status !== 202) throw new Error(`${action} of ${org}/${runId}: HTTP ${res.status} ${JSON.stringify(res.body)}`);
  }
}

export function uniqueId(prefix: string): string {
  return `${prefix}-${randomBytes(5).toString('hex')}`;
}
