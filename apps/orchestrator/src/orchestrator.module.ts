import { Module, type DynamicModule } from '@nestjs/common';
import { TOPICS } from '@agentrun/contracts';
import { CommandService } from '@agentrun/commands';
import { CommandLedger } from '@agentrun/persistence';
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
            new CommandService({
              get temporal() {
                return temporal.client;
              },
              ledger: new CommandLedger(db.dataSource),
              taskQueuePrefix: config.AGENTRUN_TASK_QUEUE_PREFIX,
              stepsPerExecution: config.AGENTRUN_STEPS_PER_EXECUTION,
              publishOutcome: (outcome) =>
                kafka.bus.send(kafka.topic(TOPICS.commandResults), [{ key: outcome.run_id, value: JSON.stringify(outcome) }]),
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
