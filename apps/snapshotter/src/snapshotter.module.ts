import { Module, type DynamicModule } from '@nestjs/common';
import { Database, HealthController, PLATFORM_CONFIG, READINESS_CHECKS, Readiness, SERVICE_NAME } from '@agentrun/runtime';
import type { SnapshotterConfig } from './config';
import { SnapshotLaneWorker } from './snapshot-lane.worker';

@Module({})
export class SnapshotterModule {
  static forRoot(config: SnapshotterConfig): DynamicModule {
    return {
      module: SnapshotterModule,
      controllers: [HealthController],
      providers: [
        { provide: PLATFORM_CONFIG, useValue: config },
        { provide: SERVICE_NAME, useValue: 'snapshotter' },
        Database,
        SnapshotLaneWorker,
        Readiness,
        { provide: READINESS_CHECKS, inject: [Database, SnapshotLaneWorker], useFactory: (...checks: unknown[]) => checks },
      ],
    };
  }
}
