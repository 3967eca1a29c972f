import 'reflect-metadata';
import { exitOnStartFailure, runService } from '@agentrun/runtime';
import { loadGpuWorkerConfig } from './config';
import { GpuWorkerModule } from './gpu-worker.module';

async function main(): Promise<void> {
  const config = loadGpuWorkerConfig();
  await runService(GpuWorkerModule.forRoot(config), { name: 'gpu-worker', host: config.GPU_WORKER_HOST, port: config.GPU_WORKER_PORT, shutdownGraceMs: config.SHUTDOWN_GRACE_MS, tracing: config, logging: config });
}

main().catch(exitOnStartFailure('gpu-worker'));
