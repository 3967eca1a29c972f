import { Module, type DynamicModule } from '@nestjs/common';
import { APP_FILTER, APP_INTERCEPTOR } from '@nestjs/core';
import { commandServiceProvider, DatasetCatalog } from '@agentrun/commands';
import { CursorCodec, EvalStore, ReadModel, SessionStore, SnapshotManifest, TokenStore } from '@agentrun/persistence';
import { modelEndpointNames } from '@agentrun/config';
import type { ObjectStore } from '@agentrun/archive';
import { EvalsController } from './evals.controller';
import { createObjectStore, objectStoreConfigOf } from '@agentrun/archive';
import { Database, HealthController, Kafka, PLATFORM_CONFIG, READINESS_CHECKS, Readiness, SERVICE_NAME, Temporal } from '@agentrun/runtime';
import { CommandsController } from './commands.controller';
import type { GatewayConfig } from './config';
import { UsageController } from './usage.controller';
import { DashboardController } from './dashboard.controller';
import { ApiDocument, DocsController } from './docs.controller';
import { LiveEventsHub } from './live-events.hub';
import { LiveTokensHub } from './live-tokens.hub';
import { LogContextInterceptor } from './log-context.interceptor';
import { OrgGuard } from './org';
import { ProblemFilter } from './problem';
import { RunEventsController } from './run-events.controller';
import { RunsController } from './runs.controller';
import { SessionController } from './session.controller';
import { OBJECT_STORE, SnapshotsController } from './snapshots.controller';
import { DiffsController } from './diffs.controller';
import { SnapshotArchives } from './snapshot-archives';

@Module({})
export class GatewayModule {
  static forRoot(config: GatewayConfig): DynamicModule {
    return {
      module: GatewayModule,
      controllers: [HealthController, DocsController, RunsController, RunEventsController, CommandsController, SessionController, SnapshotsController, DiffsController, EvalsController, UsageController, DashboardController],
      providers: [
        { provide: PLATFORM_CONFIG, useValue: config },
        { provide: SERVICE_NAME, useValue: 'gateway' },
        { provide: APP_FILTER, useClass: ProblemFilter },
        { provide: APP_INTERCEPTOR, useClass: LogContextInterceptor },
        Database,
        Kafka,
        Temporal,
        LiveEventsHub,
        LiveTokensHub,
        ApiDocument,
        { provide: TokenStore, inject: [Database], useFactory: (db: Database) => new TokenStore(db.dataSource) },
        { provide: SessionStore, inject: [Database], useFactory: (db: Database) => new SessionStore(db.dataSource) },
        OrgGuard,
        { provide: ReadModel, inject: [Database], useFactory: (db: Database) => new ReadModel(db.dataSource) },
        { provide: CursorCodec, useValue: new CursorCodec(config.CURSOR_SECRET) },
        { provide: SnapshotManifest, inject: [Database], useFactory: (db: Database) => new SnapshotManifest(db.dataSource) },
        { provide: OBJECT_STORE, useValue: createObjectStore(objectStoreConfigOf(config)) },
        SnapshotArchives,
        commandServiceProvider(config),
        { provide: EvalStore, inject: [Database], useFactory: (db: Database) => new EvalStore(db.dataSource) },
        {
          provide: DatasetCatalog,
          inject: [EvalStore, OBJECT_STORE],
          useFactory: (evals: EvalStore, store: ObjectStore) =>
            new DatasetCatalog(evals, store, modelEndpointNames(config.AGENTRUN_MODEL_ENDPOINTS)),
        },
        Readiness,
        { provide: READINESS_CHECKS, inject: [Database, Kafka, Temporal, LiveEventsHub, LiveTokensHub], useFactory: (...checks: unknown[]) => checks },
      ],
    };
  }
}
