import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { exitOnStartFailure, runService } from '@agentrun/runtime';
import express from 'express';
import { loadGatewayConfig } from './config';
import { GatewayModule } from './gateway.module';
import { bodyErrorHandler } from './problem';

async function main(): Promise<void> {
  const config = loadGatewayConfig();
  if (config.AGENTRUN_MODE === 'production') {
    throw new Error('AGENTRUN_MODE=production needs bearer-token auth, which this gateway does not have yet; run with AGENTRUN_MODE=local');
  }
  new Logger('gateway').warn('LOCAL MODE: the org is taken from the X-Org header with no authentication. Never expose this gateway.');
  await runService(GatewayModule.forRoot(config), {
    name: 'gateway',
    port: config.GATEWAY_PORT,
    host: config.GATEWAY_HOST,
    shutdownGraceMs: config.SHUTDOWN_GRACE_MS,
    bodyParser: false,
    configure: (app) => {
      app.use(express.json({ limit: '64kb', strict: false }));
      app.use(bodyErrorHandler);
    },
  });
}

main().catch(exitOnStartFailure('gateway'));
