import { Module, type DynamicModule } from '@nestjs/common';
import { commandServiceProvider } from '@agentrun/commands';
import { KafkaBusTransport } from '@agentrun/kafka';
import { Database, HealthController, Kafka, PLATFORM_CONFIG, READINESS_CHECKS, Readiness, SERVICE_NAME, Temporal } from '@agentrun/runtime';
import { COMMAND_GROUP, CommandConsumer } from './command-consumer';
import type { OrchestratorConfig } from './config';
import { TemporalWorkers } from './temporal-workers';

@Module({})
export class OrchestratorModule {
  static forRoot(config: OrchestratorConfig): DynamicModule {
    return {
      module: OrchestratorModule,
      controllers: [HealthController, CommandConsumer],
      providers: [
        { provide: PLATFORM_CONFIG, useValue: config },
        { provide: SERVICE_NAME, useValue: 'orchestrator' },
        Database,
        Kafka,
        Temporal,
        commandServiceProvider(config),
        TemporalWorkers,
        {
          // The transport CommandConsumer's handler runs on; main.ts connects it to the app.
          provide: KafkaBusTransport,
          inject: [Kafka],
          useFactory: (kafka: Kafka) =>
            new KafkaBusTransport({
              name: 'command-consumer',
              bus: kafka.bus,
              groupId: kafka.groupId(COMMAND_GROUP),
              topic: (name) => kafka.topic(name),
              concurrency: config.COMMAND_CONCURRENCY,
            }),
        },
        Readiness,
        {
          provide: READINESS_CHECKS,
          inject: [Database, Kafka, Temporal, TemporalWorkers, KafkaBusTransport],
          useFactory: (...checks: unknown[]) => checks,
        },
      ],
    };
  }
}
