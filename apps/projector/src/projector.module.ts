import { Module, type DynamicModule } from '@nestjs/common';
import { Database, HealthController, Kafka, PLATFORM_CONFIG, READINESS_CHECKS, Readiness, SERVICE_NAME } from '@agentrun/runtime';
import type { ProjectorConfig } from './config';
import { RunEventProjector } from './run-event.projector';

@Module({})
export class ProjectorModule {
  static forRoot(config: ProjectorConfig): DynamicModule {
    return {
      module: ProjectorModule,
      controllers: [HealthController],
      providers: [
        { provide: PLATFORM_CONFIG, useValue: config },
        { provide: SERVICE_NAME, useValue: 'projector' },
        Database,
        Kafka,
        RunEventProjector,
        Readiness,
        { provide: READINESS_CHECKS, inject: [Database, Kafka, RunEventProjector], useFactory: (...checks: unknown[]) => checks },
      ],
    };
  }
}
