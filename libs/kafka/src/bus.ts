import { CompressionTypes, Kafka, logLevel, Partitioners, type Admin, type Consumer, type Producer } from 'kafkajs';

/** Kafka behind our own interface: no kafkajs type leaves this lib, so the client can be swapped. */
export interface InboundMessage {
  topic: string;
  partition: number;
  offset: string;
  key: Buffer | null;
  value: Buffer | null;
  timestamp: string;
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
  log?: (level: 'error' | 'warn' | 'info', message: string) => void;
}

export interface ConsumerHandle {
  stop(): Promise<void>;
  /** True while the consumer is in a group and fetching. */
  isRunning(): boolean;
}

export class KafkaBus {
  private readonly kafka: Kafka;
  private producerReady?: Promise<Producer>;
  private readonly consumers = new Set<Consumer>();

  constructor(private readonly options: KafkaBusOptions) {
    const log = options.log;
    this.kafka = new Kafka({
      clientId: options.clientId,
      brokers: options.brokers,
      logLevel: logLevel.WARN,
      retry: { initialRetryTime: 200, retries: 8, maxRetryTime: 5_000 },
      logCreator: () => (entry) => {
        if (!log) return;
        const level = entry.level === logLevel.ERROR ? 'error' : entry.level === logLevel.WARN ? 'warn' : 'info';
        log(level, `kafka ${entry.namespace}: ${entry.log.message}`);
      },
    });
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

  /** Sends in order and resolves once every message is acknowledged by all in-sync replicas. */
  async send(topic: string, messages: OutboundMessage[]): Promise<void> {
    if (messages.length === 0) return;
    const producer = await this.producer();
    await producer.send({
      topic,
      acks: -1,
      compression: CompressionTypes.None,
      messages: messages.map((m) => ({ key: m.key, value: m.value, headers: m.headers })),
    });
  }

  async consume(options: ConsumeOptions): Promise<ConsumerHandle> {
    const { timings } = this.options;
    const consumer = this.kafka.consumer({
      groupId: options.groupId,
      sessionTimeout: timings.sessionTimeout,
      heartbeatInterval: timings.heartbeatInterval,
      rebalanceTimeout: timings.rebalanceTimeout,
      allowAutoTopicCreation: false,
      retry: { retries: Number.MAX_SAFE_INTEGER, initialRetryTime: 300, maxRetryTime: 5_000 },
    });
    this.consumers.add(consumer);
    let running = false;
    consumer.on(consumer.events.GROUP_JOIN, () => (running = true));
    consumer.on(consumer.events.STOP, () => (running = false));
    consumer.on(consumer.events.CRASH, () => (running = false));
    await consumer.connect();
    await consumer.subscribe({ topics: options.topics, fromBeginning: options.fromBeginning ?? true });
    await consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: options.concurrency ?? 1,
      eachBatch: async ({ batch, resolveOffset, commitOffsetsIfNecessary, heartbeat, isRunning, isStale }) => {
        const messages: InboundMessage[] = batch.messages.map((m) => ({
          topic: batch.topic,
          partition: batch.partition,
          offset: m.offset,
          key: m.key,
          value: m.value,
          timestamp: m.timestamp,
        }));
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
      },
    });
    return {
      isRunning: () => running,
      stop: async () => {
        this.consumers.delete(consumer);
        await consumer.disconnect();
      },
    };
  }

  /** Creates missing topics; never changes an existing one. */
  async ensureTopics(topics: string[], partitions: number, configs: Record<string, string> = {}): Promise<void> {
    const admin: Admin = this.kafka.admin();
    await admin.connect();
    try {
      const existing = new Set(await admin.listTopics());
      const missing = topics.filter((t) => !existing.has(t));
      if (missing.length) {
        await admin.createTopics({
          waitForLeaders: true,
          topics: missing.map((topic) => ({
            topic,
            numPartitions: partitions,
            replicationFactor: 1,
            configEntries: Object.entries(configs).map(([name, value]) => ({ name, value })),
          })),
        });
      }
    } finally {
      await admin.disconnect();
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
    await Promise.all([...this.consumers].map((c) => c.disconnect()));
    this.consumers.clear();
    const producer = this.producerReady;
    this.producerReady = undefined;
    if (producer) await (await producer.catch(() => undefined))?.disconnect();
  }
}
