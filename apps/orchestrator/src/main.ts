import 'reflect-metadata';
import { KafkaBusTransport } from '@agentrun/kafka';
import { exitOnStartFailure, runService } from '@agentrun/runtime';
import { loadOrchestratorConfig } from './config';
import { OrchestratorModule } from './orchestrator.module';

async function main(): Promise<void> {
  const config = loadOrchestratorConfig();
  await runService(OrchestratorModule.forRoot(config), {
    name: 'orchestrator',
    host: config.ORCHESTRATOR_HOST,
    port: config.ORCHESTRATOR_PORT,
    shutdownGraceMs: config.SHUTDOWN_GRACE_MS,
    transports: (app) => [app.get(KafkaBusTransport)],
  });
}

main().catch(exitOnStartFailure('orchestrator'));
