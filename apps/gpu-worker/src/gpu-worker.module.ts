import { Module, type DynamicModule } from '@nestjs/common';
import { TOPICS } from '@agentrun/contracts';
import { Database, HealthController, Kafka, KAFKA_TOPICS_USED, PLATFORM_CONFIG, READINESS_CHECKS, Readiness, SERVICE_NAME } from '@agentrun/runtime';
import type { GpuWorkerConfig } from './config';
import { GpuLaneWorker } from './gpu-lane.worker';

@Module({})
export class GpuWorkerModule {
  static forRoot(config: GpuWorkerConfig): DynamicModule {
    return {
      module: GpuWorkerModule,
      controllers: [HealthController],
      providers: [
        { provide: PLATFORM_CONFIG, useValue: config },
        { provide: SERVICE_NAME, useValue: 'gpu-worker' },
        // It only publishes the run events its calls carry.
        { provide: KAFKA_TOPICS_USED, useValue: [TOPICS.runEvents] },
        Database,
        Kafka,
        GpuLaneWorker,
        Readiness,
        { provide: READINESS_CHECKS, inject: [Database, Kafka, GpuLaneWorker], useFactory: (...checks: unknown[]) => checks },
      ],
    };
  }
}
