import 'reflect-metadata';
import { KafkaBusTransport } from '@agentrun/kafka';
import { exitOnStartFailure, runService } from '@agentrun/runtime';
import { loadProjectorConfig } from './config';
import { ProjectorModule } from './projector.module';

async function main(): Promise<void> {
  const config = loadProjectorConfig();
  await runService(ProjectorModule.forRoot(config), {
    name: 'projector',
    host: config.PROJECTOR_HOST,
    port: config.PROJECTOR_PORT,
    shutdownGraceMs: config.SHUTDOWN_GRACE_MS,
    tracing: config,
    logging: config,
    transports: (app) => [app.get(KafkaBusTransport)],
  });
}

main().catch(exitOnStartFailure('projector'));
