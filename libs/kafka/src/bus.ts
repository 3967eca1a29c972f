import { ConfigResourceTypes, ConfigSource, Kafka, logLevel, Partitioners, type Admin, type Consumer, type KafkaConfig, type Producer } from 'kafkajs';
import type { KafkaSasl, KafkaTls } from './security';
import { PRODUCE_REQUEST_BYTES, type DescribedTopic, type TopicAdmin, type TopicSpec } from './topics';
import { SendQueue } from './send-queue';
import { CODEC_IDS, DEFAULT_MAX_DECOMPRESSED_BATCH_BYTES, type KafkaCompression } from './codecs';
import { installKafkaDecoding, undecodableOf, type UndecodableBatch } from './fetch-decoding';
import { installRequestQueueFix } from './request-queue';

/** Kafka behind our own interface: no kafkajs type leaves this lib, so the client can be swapped. */
export interface InboundMessage {
  topic: string;
  partition: number;
  offset: string;
  key: Buffer | null;
  value: Buffer | null;
  timestamp: string;
  /** Record headers decoded as UTF-8; a name sent more than once has all its values, in order. */
  headers?: Record<string, string | string[]>;
  /**
   * Set when this is no record but a record batch the client could not read (its codec failed, or it
   * inflates past the bound): `offset` is the batch's last offset, so committing it moves past the
   * whole batch. The handler dead-letters it (`undecodable_batch`); key and value are null.
   */
  undecodable?: UndecodableBatch;
}

export interface OutboundMessage {
  key: string;
  value: string | Buffer;
  headers?: Record<string, string>;
}

export interface BatchContext {
  /** Marks everything up to and including `offset` as done and commits it. */
  commit(offset: string): Promise<void>;
  heartbeat(): Promise<void>;
  /** False once the consumer is stopping or the partition was taken away: stop and do not commit. */
  isActive(): boolean;
}

export type BatchHandler = (messages: InboundMessage[], ctx: BatchContext) => Promise<void>;

export interface ConsumeOptions {
  groupId: string;
  topics: string[];
  fromBeginning?: boolean;
  /** Partitions handled at once; each partition's messages stay in order. */
  concurrency?: number;
  /**
   * A live reader (false): each batch counts as done once its handler returns, in memory only; nothing is
   * committed, so a restart reads from where `fromBeginning` says again. Default true: the handler commits.
   */
  commits?: boolean;
  handle: BatchHandler;
}

export interface KafkaTimings {
  sessionTimeout: number;
  heartbeatInterval: number;
  rebalanceTimeout: number;
}

export interface KafkaBusOptions {
  brokers: string[];
  clientId: string;
  timings: KafkaTimings;
  /** From `kafkaClientSecurity`: TLS when the protocol is SSL or SASL_SSL. */
  ssl?: KafkaTls;
  /** From `kafkaClientSecurity`: the login when the protocol is SASL_*. */
  sasl?: KafkaSasl;
  log?: (level: 'error' | 'warn' | 'info', message: string) => void;
  /** The codec of what this bus produces (KAFKA_COMPRESSION); `none` by default. Every codec is read whatever this says. */
  compression?: KafkaCompression;
  /** How far one fetched batch may inflate before it is refused as undecodable (KAFKA_MAX_DECOMPRESSED_BATCH_BYTES). */
  maxDecompressedBatchBytes?: number;
}

/** A consumer that has not crashed for this long starts its backoff again from 1 s. */
const CRASH_QUIET_MS = 60_000;

/** How long a consumer that crashed waits before it starts again: doubling from 1 s to 30 s. */
export function consumerRestartDelay(attempt: number): number {
  return Math.min(30_000, 1_000 * 2 ** Math.max(0, Math.min(attempt - 1, 5)));
}

/** kafkajs gives header values as Buffers (or arrays of them); callers get text. */
function decodeHeaders(headers: Record<string, Buffer | string | (Buffer | string)[] | undefined> | undefined): Record<string, string | string[]> {
  const decoded: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (value === undefined) continue;
    decoded[name] = Array.isArray(value) ? value.map((v) => v.toString()) : value.toString();
  }
  return decoded;
}

/** A record's size as the coalescing counts it: its value, key and header bytes. */
function recordBytes(m: OutboundMessage): number {
  let n = Buffer.byteLength(m.key) + (typeof m.value === 'string' ? Buffer.byteLength(m.value) : m.value.length);
  for (const [name, value] of Object.entries(m.headers ?? {})) n += name.length + Buffer.byteLength(value);
  return n;
}

/** How many times a startup round trip is tried before it gives up (with the client's backoff, seconds in all). */
const STARTUP_RETRIES = 3;

/** Where a consumer group stands on one partition: the log's start and end (high watermark), and the group's committed offset (-1: none). */
export interface PartitionOffsets {
  topic: string;
  partition: number;
  low: string;
  high: string;
  committed: string;
}

export interface ConsumerHandle {
  stop(): Promise<void>;
  /** True while the consumer is in a group and fetching. */
  isRunning(): boolean;
}

export class KafkaBus implements TopicAdmin {
  private readonly kafka: Kafka;
  private readonly clientConfig: KafkaConfig;
  private producerReady?: Promise<Producer>;
  private liveProducerReady?: Promise<Producer>;
  private readonly consumers = new Set<ConsumerHandle>();
  /** The ordered, fully acknowledged sends, coalesced while one is in flight. */
  private readonly sends = new SendQueue<OutboundMessage>(
    async ({ topic, messages }) => {
      const producer = await this.producer();
      await producer.send({ topic, acks: -1, compression: this.compression, messages: messages.map((m) => ({ key: m.key, value: m.value, headers: m.headers })) });
    },
    recordBytes,
    PRODUCE_REQUEST_BYTES,
  );
  /** Kept connected for repeated offset reads (metrics scrapes); dropped on an error, made again on the next read. */
  private offsetsAdmin?: Promise<Admin>;

  /** kafkajs's codec id for what this bus produces. */
  private readonly compression: number;

  constructor(private readonly options: KafkaBusOptions) {
    const log = options.log;
    installKafkaDecoding(options.maxDecompressedBatchBytes ?? DEFAULT_MAX_DECOMPRESSED_BATCH_BYTES);
    installRequestQueueFix();
    this.compression = CODEC_IDS[options.compression ?? 'none'];
    this.clientConfig = {
      clientId: options.clientId,
      brokers: options.brokers,
      ssl: options.ssl,
      sasl: options.sasl,
      logLevel: logLevel.WARN,
      retry: { initialRetryTime: 200, retries: 8, maxRetryTime: 5_000 },
      logCreator: () => (entry) => {
        if (!log) return;
        const level = entry.level === logLevel.ERROR ? 'error' : entry.level === logLevel.WARN ? 'warn' : 'info';
        log(level, `kafka ${entry.namespace}: ${entry.log.message}`);
      },
    };
    this.kafka = new Kafka(this.clientConfig);
  }

  get brokers(): readonly string[] {
    return this.options.brokers;
  }

  get clientId(): string {
    return this.options.clientId;
  }

  private producer(): Promise<Producer> {
    if (!this.producerReady) {
      // The default partitioner is murmur2 like the Java client's, so every producer of a run id
      // (ours, Java, librdkafka with murmur2_random) picks the same partition. Retries are bounded
      // on purpose: a send that gives up fails its activity, whose retry may repeat a batch, and
      // consumers dedupe by (org, run_id, seq).
      const producer = this.kafka.producer({
        idempotent: true,
        maxInFlightRequests: 1,
        allowAutoTopicCreation: false,
        createPartitioner: Partitioners.DefaultPartitioner,
      });
      this.producerReady = producer.connect().then(
        () => producer,
        (err: unknown) => {
          this.producerReady = undefined;
          throw err;
        },
      );
    }
    return this.producerReady;
  }

  /**
   * Sends in order and resolves once every message is acknowledged by all in-sync replicas. Sends made
   * while another is in flight share the next request (`SendQueue`): one request per round trip however
   * many runs publish at once, instead of one round trip each. Each topic is its own queue. After
   * `close()` a send is refused (`SendQueueClosed`).
   */
  send(topic: string, messages: OutboundMessage[]): Promise<void> {
    return this.sends.send(topic, messages);
  }

  /**
   * Sends live-only records (model reply deltas), which may be lost or repeated: acknowledged by the
   * partition leader only, on a producer of their own, so they never queue behind (or hold up) the
   * ordered, fully acknowledged sends of `send`.
   */
  async sendLive(topic: string, messages: OutboundMessage[]): Promise<void> {
    if (messages.length === 0) return;
    if (!this.liveProducerReady) {
      const producer = this.kafka.producer({ idempotent: false, allowAutoTopicCreation: false, createPartitioner: Partitioners.DefaultPartitioner, retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 1_000 } });
      this.liveProducerReady = producer.connect().then(
        () => producer,
        (err: unknown) => {
          this.liveProducerReady = undefined;
          throw err;
        },
      );
    }
    const producer = await this.liveProducerReady;
    await producer.send({ topic, acks: 1, compression: this.compression, messages: messages.map((m) => ({ key: m.key, value: m.value, headers: m.headers })) });
  }

  /**
   * Starts a consumer and keeps it consuming: kafkajs restarts one itself after a retriable error, and
   * gives up for good after any other; then this starts a new one, backing off from 1 s to 30 s while
   * it keeps crashing (a minute without a crash starts again from 1 s), until `stop`. A batch that
   * cannot be read reaches the handler as a marker message (`undecodable`), so the handler's commit
   * moves past it.
   */
  async consume(options: ConsumeOptions): Promise<ConsumerHandle> {
    let current: Consumer | undefined;
    /** The start in progress, which `stop` waits for before it disconnects. */
    let starting: Promise<void> | undefined;
    let running = false;
    let stopped = false;
    let restart: NodeJS.Timeout | undefined;
    /** Crashes in a row (none for CRASH_QUIET_MS resets it): the next start's backoff. */
    let crashes = 0;
    let lastCrash = 0;
    const log = this.options.log ?? (() => undefined);
    const later = (why: string) => {
      if (stopped) return;
      if (Date.now() - lastCrash > CRASH_QUIET_MS) crashes = 0;
      crashes++;
      lastCrash = Date.now();
      const delay = consumerRestartDelay(crashes);
      log('error', `kafka consumer ${options.groupId} stopped (${why}); starting it again in ${delay} ms`);
      restart = setTimeout(() => {
        restart = undefined;
        if (stopped) return;
        starting = begin().catch((err: unknown) => later(`starting failed: ${(err as Error).message}`));
      }, delay);
    };
    const begin = async (): Promise<void> => {
      const consumer = this.consumerFor(options);
      current = consumer;
      consumer.on(consumer.events.GROUP_JOIN, () => (running = !stopped));
      consumer.on(consumer.events.STOP, () => (running = false));
      consumer.on(consumer.events.CRASH, (event) => {
        running = false;
        // kafkajs disconnected it before saying so; with `restart` it starts it again itself.
        if (event.payload.restart || consumer !== current) return;
        const error = event.payload.error as Error;
        later(`${error.name}: ${error.message}`);
      });
      try {
        // A stop while this was on its way: nothing of it may go on consuming.
        for (const step of [() => consumer.connect(), () => consumer.subscribe({ topics: options.topics, fromBeginning: options.fromBeginning ?? true }), () => this.run(consumer, options)]) {
          if (stopped) break;
          await step();
        }
        if (stopped) await consumer.disconnect();
      } catch (err) {
        await consumer.disconnect().catch(() => undefined);
        throw err;
      }
    };
    const handle: ConsumerHandle = {
      isRunning: () => running,
      stop: async () => {
        stopped = true;
        running = false;
        clearTimeout(restart);
        this.consumers.delete(handle);
        await starting?.catch(() => undefined);
        await current?.disconnect();
      },
    };
    this.consumers.add(handle);
    // A first start that cannot connect or subscribe is thrown (a service that cannot reach its topics
    // at startup says so); one that fails later, joining the group, crashes and is started again.
    starting = begin();
    try {
      await starting;
    } catch (err) {
      this.consumers.delete(handle);
      stopped = true;
      throw err;
    }
    return handle;
  }

  private consumerFor(options: ConsumeOptions): Consumer {
    const { timings } = this.options;
    return this.kafka.consumer({
      groupId: options.groupId,
      sessionTimeout: timings.sessionTimeout,
      heartbeatInterval: timings.heartbeatInterval,
      rebalanceTimeout: timings.rebalanceTimeout,
      allowAutoTopicCreation: false,
      retry: { retries: Number.MAX_SAFE_INTEGER, initialRetryTime: 300, maxRetryTime: 5_000 },
    });
  }

  private async run(consumer: Consumer, options: ConsumeOptions): Promise<void> {
    const { timings } = this.options;
    await consumer.run({
      autoCommit: false,
      // Without commits the batch's offsets are resolved when its handler returns, or the next fetch reads it again.
      eachBatchAutoResolve: options.commits === false,
      partitionsConsumedConcurrently: options.concurrency ?? 1,
      eachBatch: async ({ batch, resolveOffset, commitOffsetsIfNecessary, heartbeat, isRunning, isStale }) => {
        const messages: InboundMessage[] = batch.messages.map((m) => {
          const undecodable = undecodableOf(m);
          return {
            topic: batch.topic,
            partition: batch.partition,
            offset: m.offset,
            key: m.key,
            value: m.value,
            timestamp: m.timestamp,
            headers: decodeHeaders(m.headers),
            ...(undecodable ? { undecodable } : {}),
          };
        });
        // The group hears from this member while a handler works, however long one message takes: a
        // decision that outlasted the session (10 s under load, against the test profile's 8 s) got the
        // member removed, its commit refused, and the message read and decided again (issue 35).
        // kafkajs sends a heartbeat only once its interval has passed, so calling it often costs nothing.
        const keepAlive = setInterval(() => {
          heartbeat().catch(() => undefined);
        }, timings.heartbeatInterval);
        try {
          await options.handle(messages, {
            // The batch's own commit: unlike consumer.commitOffsets it still commits while the consumer
            // is stopping, so work finished during a drain is not read and done again.
            commit: async (offset) => {
              resolveOffset(offset);
              await commitOffsetsIfNecessary({
                topics: [{ topic: batch.topic, partitions: [{ partition: batch.partition, offset: (BigInt(offset) + 1n).toString() }] }],
              });
            },
            heartbeat,
            isActive: () => isRunning() && !isStale(),
          });
        } finally {
          clearInterval(keepAlive);
        }
      },
    });
  }

  /**
   * The named topics as the cluster has them (missing ones are left out). Tried only a few times: it is
   * what a service asks at startup, where a wrong password or an untrusted certificate must end in one
   * clear failure instead of a retry loop.
   */
  async describeTopics(names: string[]): Promise<DescribedTopic[]> {
    // Quiet: whatever fails here is thrown, and the caller explains it in one message.
    const startup = new Kafka({ ...this.clientConfig, logLevel: logLevel.NOTHING, retry: { initialRetryTime: 300, retries: STARTUP_RETRIES, maxRetryTime: 2_000 } });
    return this.withAdmin(startup.admin(), async (admin) => {
      const existing = new Set(await admin.listTopics());
      const present = names.filter((n) => existing.has(n));
      if (!present.length) return [];
      const { topics } = await admin.fetchTopicMetadata({ topics: present });
      const { resources } = await admin
        .describeConfigs({ includeSynonyms: false, resources: present.map((name) => ({ type: ConfigResourceTypes.TOPIC, name })) })
        .catch((err: unknown) => {
          // A principal with Describe but not DescribeConfigs still learns what matters most: existence and partitions.
          if (String((err as { type?: string }).type ?? '').includes('AUTHORIZATION')) return { resources: [] };
          throw err;
        });
      return topics.map((t) => {
        const resource = resources.find((r) => r.resourceName === t.name);
        if (!resource || resource.errorCode !== 0) {
          return { name: t.name, partitions: t.partitions.length, replicationFactor: Math.min(...t.partitions.map((p) => p.replicas.length)), configs: null, overrides: {} };
        }
        const entries = resource.configEntries;
        const configs: Record<string, string> = {};
        const overrides: Record<string, string> = {};
        for (const e of entries) {
          if (e.configValue === null || e.configValue === undefined) continue;
          configs[e.configName] = e.configValue;
          if (e.configSource === ConfigSource.TOPIC_CONFIG && !e.isSensitive) overrides[e.configName] = e.configValue;
        }
        return {
          name: t.name,
          partitions: t.partitions.length,
          replicationFactor: Math.min(...t.partitions.map((p) => p.replicas.length)),
          configs,
          overrides,
        };
      });
    });
  }

  async createTopics(specs: TopicSpec[]): Promise<void> {
    await this.withAdmin(this.kafka.admin(), async (admin) => {
      await admin.createTopics({
        waitForLeaders: true,
        topics: specs.map((s) => ({
          topic: s.name,
          numPartitions: s.partitions,
          replicationFactor: s.replicationFactor,
          configEntries: Object.entries(s.configs).map(([name, value]) => ({ name, value })),
        })),
      });
    });
  }

  async raisePartitions(changes: { topic: string; count: number }[]): Promise<void> {
    await this.withAdmin(this.kafka.admin(), (admin) => admin.createPartitions({ topicPartitions: changes }));
  }

  /** Sets exactly these configs on the topic: kafkajs has only the non-incremental alter, which resets any left out. */
  async replaceTopicConfigs(topic: string, configs: Record<string, string>): Promise<void> {
    await this.withAdmin(this.kafka.admin(), (admin) =>
      admin.alterConfigs({
        validateOnly: false,
        resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configEntries: Object.entries(configs).map(([name, value]) => ({ name, value })) }],
      }),
    );
  }

  /** Deletes topics (tests clean up with it). */
  async deleteTopics(names: string[]): Promise<void> {
    await this.withAdmin(this.kafka.admin(), (admin) => admin.deleteTopics({ topics: names }));
  }

  private async withAdmin<T>(admin: Admin, work: (admin: Admin) => Promise<T>): Promise<T> {
    try {
      // Inside the try: a connect that fails halfway still leaves sockets to close.
      await admin.connect();
      return await work(admin);
    } finally {
      await admin.disconnect();
    }
  }

  /**
   * The group's committed offsets against each partition's watermarks, for consumer lag. Two admin
   * requests over one connection kept for the next call; a failed read drops the connection.
   */
  async groupOffsets(groupId: string, topics: string[]): Promise<PartitionOffsets[]> {
    this.offsetsAdmin ??= (async () => {
      const admin = this.kafka.admin();
      await admin.connect();
      return admin;
    })();
    const ready = this.offsetsAdmin;
    try {
      const admin = await ready;
      const committed = await admin.fetchOffsets({ groupId, topics });
      const out: PartitionOffsets[] = [];
      for (const topic of topics) {
        const marks = await admin.fetchTopicOffsets(topic);
        const group = committed.find((c) => c.topic === topic)?.partitions ?? [];
        for (const mark of marks) {
          out.push({ topic, partition: mark.partition, low: mark.low, high: mark.high, committed: group.find((p) => p.partition === mark.partition)?.offset ?? '-1' });
        }
      }
      return out;
    } catch (err) {
      if (this.offsetsAdmin === ready) this.offsetsAdmin = undefined;
      void ready.then((admin) => admin.disconnect()).catch(() => undefined);
      throw err;
    }
  }

  /** A cheap round trip to the cluster, for readiness checks. */
  async ping(): Promise<void> {
    const admin = this.kafka.admin();
    await admin.connect();
    try {
      await admin.describeCluster();
    } finally {
      await admin.disconnect();
    }
  }

  async close(): Promise<void> {
    await Promise.all([...this.consumers].map((c) => c.stop()));
    // No new sends from here; those made before are acknowledged (or fail) before their producer goes.
    await this.sends.close();
    this.consumers.clear();
    const offsets = this.offsetsAdmin;
    this.offsetsAdmin = undefined;
    if (offsets) await (await offsets.catch(() => undefined))?.disconnect();
    const producers = [this.producerReady, this.liveProducerReady];
    this.producerReady = undefined;
    this.liveProducerReady = undefined;
    await Promise.all(producers.map(async (producer) => (producer ? (await producer.catch(() => undefined))?.disconnect() : undefined)));
  }
}

