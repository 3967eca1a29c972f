import 'reflect-metadata';
import { exitOnStartFailure, runService } from '@agentrun/runtime';
import { loadSnapshotterConfig } from './config';
import { SnapshotterModule } from './snapshotter.module';

async function main(): Promise<void> {
  const config = loadSnapshotterConfig();
  await runService(SnapshotterModule.forRoot(config), { name: 'snapshotter', host: config.SNAPSHOTTER_HOST, port: config.SNAPSHOTTER_PORT, shutdownGraceMs: config.SHUTDOWN_GRACE_MS, tracing: config, logging: config });
}

main().catch(exitOnStartFailure('snapshotter'));
