import { Module, type DynamicModule } from '@nestjs/common';
import { KafkaBusTransport } from '@agentrun/kafka';
import { Database, HealthController, Kafka, PLATFORM_CONFIG, READINESS_CHECKS, Readiness, SERVICE_NAME } from '@agentrun/runtime';
import type { ProjectorConfig } from './config';
import { PROJECTOR_GROUP, RunEventProjector } from './run-event.projector';

@Module({})
export class ProjectorModule {
  static forRoot(config: ProjectorConfig): DynamicModule {
    return {
      module: ProjectorModule,
      controllers: [HealthController, RunEventProjector],
      providers: [
        { provide: PLATFORM_CONFIG, useValue: config },
        { provide: SERVICE_NAME, useValue: 'projector' },
        Database,
        Kafka,
        {
          // The transport RunEventProjector's handler runs on; main.ts connects it to the app.
          provide: KafkaBusTransport,
          inject: [Kafka],
          useFactory: (kafka: Kafka) =>
            new KafkaBusTransport({
              name: 'projector-consumer',
              bus: kafka.bus,
              groupId: kafka.groupId(PROJECTOR_GROUP),
              topic: (name) => kafka.topic(name),
              concurrency: config.PROJECTOR_CONCURRENCY,
            }),
        },
        Readiness,
        { provide: READINESS_CHECKS, inject: [Database, Kafka, KafkaBusTransport], useFactory: (...checks: unknown[]) => checks },
      ],
    };
  }
}
