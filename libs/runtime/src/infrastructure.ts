import { Inject, Injectable, Optional, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { Client, type Connection } from '@temporalio/client';
import { kafkaTimings, type DatabaseConfig, type KafkaConfig, type ProfileConfig, type TemporalConfig } from '@agentrun/config';
import { checkServiceTopics, KafkaBus, kafkaClientSecurity, platformTopicSpecs, topicsUsedBy } from '@agentrun/kafka';
import { checkSchema, createDataSource, databaseOptionsFrom, migrate, pingDatabase, type DatabaseOptions } from '@agentrun/persistence';
import { partitionLag, processMetrics } from '@agentrun/telemetry';
import type { DataSource } from 'typeorm';
import type { ReadinessCheck } from './health';
import { checkNamespaceOnce, connectTemporalClient, temporalConnectionOptions } from './temporal-connection';
import { workflowClientTracing } from './temporal-tracing';

/** How long a service waits at start for Postgres to accept a connection before it gives up. */
export const DATABASE_STARTUP_TIMEOUT_MS = 30_000;

/**
 * The errors of a server not (yet) reachable: refused, timed out, or still starting. Anything else
 * (a wrong password, a missing database) cannot get better by waiting and fails the start at once.
 */
export function isUnreachable(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  if (e?.code && ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', '57P03'].includes(e.code)) return true;
  return /connection timeout|Connection terminated unexpectedly|timeout expired/i.test(e?.message ?? '');
}

/**
 * Connects the data source, trying again while Postgres is out of reach (a server still starting, or
 * a machine so loaded that a connection takes longer than the pool's timeout), up to `timeoutMs`.
 */
export async function initializeWhenReachable(dataSource: DataSource, logger: Pick<Logger, 'warn'>, timeoutMs = DATABASE_STARTUP_TIMEOUT_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 1; ; attempt++) {
    try {
      await dataSource.initialize();
      return;
    } catch (err) {
      if (!isUnreachable(err) || Date.now() >= deadline) throw err;
      const delay = Math.min(250 * 2 ** (attempt - 1), 2_000);
      logger.warn(`postgres not reachable yet (attempt ${attempt}: ${(err as Error).message}); trying again in ${delay} ms`);
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}

/** The app's whole configuration; each provider below declares the groups of it that it reads. */
export const PLATFORM_CONFIG = Symbol('PLATFORM_CONFIG');
export const SERVICE_NAME = Symbol('SERVICE_NAME');
/** Optional: the topics a process checks at start, instead of its whole service's (see `topicsUsedBy`). */
export const KAFKA_TOPICS_USED = Symbol('KAFKA_TOPICS_USED');

/**
 * Postgres for one service, ready before the app starts. With DATABASE_MIGRATE=auto it migrates under
 * the advisory lock; with `check` it only compares the schema with this build (no lock, no DDL) and
 * refuses an older one, so production runs `npm run migrate` as its own step.
 */
@Injectable()
export class Database implements OnModuleInit, OnApplicationShutdown, ReadinessCheck {
  readonly name = 'postgres';
  readonly dataSource: DataSource;
  private readonly logger = new Logger('Database');
  private readonly migrateMode: DatabaseConfig['DATABASE_MIGRATE'];
  private readonly options: DatabaseOptions;

  constructor(@Inject(PLATFORM_CONFIG) config: DatabaseConfig, @Inject(SERVICE_NAME) service: string) {
    this.options = databaseOptionsFrom(config, `agentrun-${service}`);
    this.dataSource = createDataSource(this.options);
    this.migrateMode = config.DATABASE_MIGRATE;
  }

  /**
   * Migrates on connections of its own without the statement timeout, as `npm run migrate` does: a
   * migration may rewrite a large table and take longer than any query of the service should.
   */
  private async migrateWithoutTimeout(): Promise<string[]> {
    const migrator = createDataSource({ ...this.options, applicationName: `${this.options.applicationName}-migrate`, poolSize: 2, statementTimeoutMs: 0 });
    await migrator.initialize();
    try {
      return await migrate(migrator);
    } finally {
      await migrator.destroy();
    }
  }

  async onModuleInit(): Promise<void> {
    await initializeWhenReachable(this.dataSource, this.logger);
    try {
      if (this.migrateMode === 'auto') {
        const applied = await this.migrateWithoutTimeout();
        if (applied.length) this.logger.log(`applied migrations: ${applied.join(', ')}`);
      } else {
        const warning = await checkSchema(this.dataSource);
        if (warning) this.logger.warn(warning);
      }
    } catch (err) {
      await this.dataSource.destroy();
      throw err;
    }
  }

  async check(): Promise<void> {
    await pingDatabase(this.dataSource);
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.dataSource.isInitialized) await this.dataSource.destroy();
  }
}

/**
 * The service's Kafka client. Before the service produces or consumes, it checks (once, with bounded
 * retries) that it can log in and that the topics it uses exist as declared; consumers stop first (in
 * their own shutdown), the producer last.
 */
@Injectable()
export class Kafka implements OnModuleInit, OnApplicationShutdown, ReadinessCheck {
  readonly name = 'kafka';
  readonly bus: KafkaBus;
  readonly topicPrefix: string;
  private readonly logger = new Logger('Kafka');

  constructor(
    @Inject(PLATFORM_CONFIG) private readonly config: KafkaConfig & Pick<ProfileConfig, 'AGENTRUN_PROFILE'>,
    @Inject(SERVICE_NAME) private readonly service: string,
    /** The topics this process uses, when it runs only part of its service (an orchestrator role). */
    @Optional() @Inject(KAFKA_TOPICS_USED) private readonly topicsUsed?: readonly string[],
  ) {
    this.topicPrefix = config.AGENTRUN_TOPIC_PREFIX;
    this.bus = new KafkaBus({
      brokers: config.KAFKA_BROKERS,
      clientId: config.KAFKA_CLIENT_ID ?? `agentrun-${service}`,
      timings: kafkaTimings(config),
      ...kafkaClientSecurity(config),
      compression: config.KAFKA_COMPRESSION,
      maxDecompressedBatchBytes: config.KAFKA_MAX_DECOMPRESSED_BATCH_BYTES,
      log: (level, message) => (level === 'error' ? this.logger.error(message) : this.logger.warn(message)),
    });
  }

  async onModuleInit(): Promise<void> {
    const used = new Set<string>((this.topicsUsed ?? topicsUsedBy(this.service)).map((name) => this.topic(name)));
    const specs = platformTopicSpecs(this.config, this.topicPrefix).filter((spec) => used.has(spec.name));
    const warnings = await checkServiceTopics(this.bus, specs, {
      brokers: this.config.KAFKA_BROKERS,
      security: this.config,
      checkTopics: this.config.KAFKA_TOPICS_CHECK,
    });
    for (const warning of warnings) this.logger.warn(warning);
  }

  topic(name: string): string {
    return this.topicPrefix + name;
  }

  /** The consumer group: KAFKA_GROUP_ID when set, else the service's own; prefixed like the topics. */
  groupId(defaultGroup: string): string {
    return this.topic(this.config.KAFKA_GROUP_ID ?? defaultGroup);
  }

  /**
   * Exports the group's lag on these topics (names as declared; prefixed here) as
   * `agentrun_kafka_consumer_lag`, read from the cluster at scrape time, so a stalled consumer shows it.
   */
  exportConsumerLag(groupId: string, topicNames: string[]): void {
    const topics = topicNames.map((name) => this.topic(name));
    processMetrics().kafkaConsumerLag(groupId, async () =>
      (await this.bus.groupOffsets(groupId, topics)).map((o) => ({ topic: o.topic, partition: o.partition, lag: partitionLag(o.high, o.committed, o.low) })),
    );
  }

  async check(): Promise<void> {
    await this.bus.ping();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.bus.close();
  }
}

/** A Temporal client for services that start, signal and query workflows. */
@Injectable()
export class Temporal implements OnModuleInit, OnApplicationShutdown, ReadinessCheck {
  readonly name = 'temporal';
  private connection?: Connection;
  private clientValue?: Client;

  constructor(@Inject(PLATFORM_CONFIG) private readonly config: TemporalConfig) {}

  /** Connects and checks the namespace before the app starts; either failing stops the start with one message. */
  async onModuleInit(): Promise<void> {
    const options = temporalConnectionOptions(this.config);
    this.connection = await connectTemporalClient(options);
    try {
      await checkNamespaceOnce(this.config, this.connection, options);
    } catch (err) {
      await this.connection.close();
      this.connection = undefined;
      throw err;
    }
    // Starts, signals and updates carry the caller's trace into the workflow (headers the workflow interceptors read).
    this.clientValue = new Client({ connection: this.connection, namespace: options.namespace, interceptors: { workflow: workflowClientTracing() } });
  }

  get client(): Client {
    if (!this.clientValue) throw new Error('Temporal client used before the module started');
    return this.clientValue;
  }

  async check(): Promise<void> {
    await this.connection?.healthService.check({});
  }

  async onApplicationShutdown(): Promise<void> {
    await this.connection?.close();
  }
}
