import 'reflect-metadata';
import { KafkaBusTransport } from '@agentrun/kafka';
import { exitOnStartFailure, runService } from '@agentrun/runtime';
import { loadOrchestratorConfig } from './config';
import { OrchestratorModule } from './orchestrator.module';

async function main(): Promise<void> {
  const config = loadOrchestratorConfig();
  const roles = [...config.ORCHESTRATOR_ROLES];
  await runService(OrchestratorModule.forRoot(config), {
    name: roles.length === 3 ? 'orchestrator' : `orchestrator (${roles.join(', ')})`,
    host: config.ORCHESTRATOR_HOST,
    port: config.ORCHESTRATOR_PORT,
    shutdownGraceMs: config.SHUTDOWN_GRACE_MS,
    tracing: config,
    logging: config,
    transports: (app) => (config.ORCHESTRATOR_ROLES.has('commands') ? [app.get(KafkaBusTransport)] : []),
  });
}

main().catch(exitOnStartFailure('orchestrator'));
