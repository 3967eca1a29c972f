import { Module, type DynamicModule } from '@nestjs/common';
import { agentDefaultsOf, CommandService, createCommandService } from '@agentrun/commands';
import { Database, HealthController, Kafka, PLATFORM_CONFIG, READINESS_CHECKS, Readiness, SERVICE_NAME, Temporal } from '@agentrun/runtime';
import { CommandConsumer } from './command-consumer';
import type { OrchestratorConfig } from './config';
import { TemporalWorkers } from './temporal-workers';

@Module({})
export class OrchestratorModule {
  static forRoot(config: OrchestratorConfig): DynamicModule {
    return {
      module: OrchestratorModule,
      controllers: [HealthController],
      providers: [
        { provide: PLATFORM_CONFIG, useValue: config },
        { provide: SERVICE_NAME, useValue: 'orchestrator' },
        Database,
        Kafka,
        Temporal,
        {
          provide: CommandService,
          inject: [Temporal, Database, Kafka],
          useFactory: (temporal: Temporal, db: Database, kafka: Kafka) =>
            createCommandService({
              temporal: () => temporal.client,
              dataSource: db.dataSource,
              bus: kafka.bus,
              topicPrefix: kafka.topicPrefix,
              taskQueuePrefix: config.AGENTRUN_TASK_QUEUE_PREFIX,
              agentDefaults: agentDefaultsOf(config),
            }),
        },
        TemporalWorkers,
        CommandConsumer,
        Readiness,
        {
          provide: READINESS_CHECKS,
          inject: [Database, Kafka, Temporal, TemporalWorkers, CommandConsumer],
          useFactory: (...checks: unknown[]) => checks,
        },
      ],
    };
  }
}
