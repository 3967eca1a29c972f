import { Inject, Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { Client, Connection } from '@temporalio/client';
import { kafkaTimings, type DatabaseConfig, type KafkaConfig, type ProfileConfig, type TemporalConfig } from '@agentrun/config';
import { checkServiceTopics, KafkaBus, kafkaClientSecurity, platformTopicSpecs, topicsUsedBy } from '@agentrun/kafka';
import { createDataSource, migrate, pingDatabase } from '@agentrun/persistence';
import type { DataSource } from 'typeorm';
import type { ReadinessCheck } from './health';

/** The app's whole configuration; each provider below declares the groups of it that it reads. */
export const PLATFORM_CONFIG = Symbol('PLATFORM_CONFIG');
export const SERVICE_NAME = Symbol('SERVICE_NAME');

/** Postgres for one service: connects and migrates (under the advisory lock) before the app starts. */
@Injectable()
export class Database implements OnModuleInit, OnApplicationShutdown, ReadinessCheck {
  readonly name = 'postgres';
  readonly dataSource: DataSource;
  private readonly logger = new Logger('Database');

  constructor(@Inject(PLATFORM_CONFIG) config: DatabaseConfig, @Inject(SERVICE_NAME) service: string) {
    this.dataSource = createDataSource({ url: config.DATABASE_URL, poolSize: config.DATABASE_POOL_SIZE, applicationName: `agentrun-${service}` });
  }

  async onModuleInit(): Promise<void> {
    await this.dataSource.initialize();
    const applied = await migrate(this.dataSource);
    if (applied.length) this.logger.log(`applied migrations: ${applied.join(', ')}`);
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
  ) {
    this.topicPrefix = config.AGENTRUN_TOPIC_PREFIX;
    this.bus = new KafkaBus({
      brokers: config.KAFKA_BROKERS,
      clientId: config.KAFKA_CLIENT_ID ?? `agentrun-${service}`,
      timings: kafkaTimings(config),
      ...kafkaClientSecurity(config),
      log: (level, message) => (level === 'error' ? this.logger.error(message) : this.logger.warn(message)),
    });
  }

  async onModuleInit(): Promise<void> {
    const used = new Set<string>(topicsUsedBy(this.service).map((name) => this.topic(name)));
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

  async check(): Promise<void> {
    await this.bus.ping();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.bus.close();
  }
}

/** Where the Temporal server is: what a client or a worker needs to connect. */
export type TemporalServer = Pick<TemporalConfig, 'TEMPORAL_ADDRESS' | 'TEMPORAL_NAMESPACE'>;

/** A Temporal client for services that start, signal and query workflows. */
@Injectable()
export class Temporal implements OnModuleInit, OnApplicationShutdown, ReadinessCheck {
  readonly name = 'temporal';
  private connection?: Connection;
  private clientValue?: Client;

  constructor(@Inject(PLATFORM_CONFIG) private readonly config: TemporalServer) {}

  async onModuleInit(): Promise<void> {
    this.connection = await Connection.connect({ address: this.config.TEMPORAL_ADDRESS });
    this.clientValue = new Client({ connection: this.connection, namespace: this.config.TEMPORAL_NAMESPACE });
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
