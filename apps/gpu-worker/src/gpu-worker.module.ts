import { Module, type DynamicModule } from '@nestjs/common';
import { Database, HealthController, PLATFORM_CONFIG, READINESS_CHECKS, Readiness, SERVICE_NAME } from '@agentrun/runtime';
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
        Database,
        GpuLaneWorker,
        Readiness,
        { provide: READINESS_CHECKS, inject: [Database, GpuLaneWorker], useFactory: (...checks: unknown[]) => checks },
      ],
    };
  }
}
