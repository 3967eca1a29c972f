import { Module, type DynamicModule } from '@nestjs/common';
import { commandServiceProvider } from '@agentrun/commands';
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
        commandServiceProvider(config),
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
