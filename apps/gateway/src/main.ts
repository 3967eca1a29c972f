import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { exitOnStartFailure, runService } from '@agentrun/runtime';
import express from 'express';
import { MAX_COMMAND_BYTES } from '@agentrun/contracts';
import { loadGatewayConfig } from './config';
import { GatewayModule } from './gateway.module';
import { publishOpenApiDocument } from './openapi';
import { bodyErrorHandler, verifyUtf8Body } from './problem';
import { allowedHostNames, hostAllowList } from './web-security';
import { httpMetrics } from './http-metrics';

async function main(): Promise<void> {
  const config = loadGatewayConfig();
  const logger = new Logger('gateway');
  if (config.AGENTRUN_MODE === 'production') {
    logger.log('production mode: the org comes only from an API token (Authorization: Bearer, or the session cookie); X-Org is ignored');
  } else {
    logger.warn('LOCAL MODE: without an API token the org is taken from the X-Org header with no authentication. Never expose this gateway.');
  }
  logger.log(`answering for the host names ${[...allowedHostNames(config)].join(', ')} (GATEWAY_ALLOWED_HOSTS); any other Host header is a 421`);
  await runService(GatewayModule.forRoot(config), {
    name: 'gateway',
    port: config.GATEWAY_PORT,
    host: config.GATEWAY_HOST,
    shutdownGraceMs: config.SHUTDOWN_GRACE_MS,
    bodyParser: false,
    configure: (app) => {
      // First, so every answer is counted, the Host check's 421s included (by route template, never the raw path).
      app.use(httpMetrics());
      // Before anything else, the body included: a request for another host name is not ours to read.
      app.use(hostAllowList(allowedHostNames(config)));
      // Express then reads the scheme (req.protocol, req.secure) from the proxy's X-Forwarded-Proto.
      if (config.GATEWAY_TRUST_PROXY) (app.getHttpAdapter().getInstance() as express.Express).set('trust proxy', true);
      // One limit for a command however it arrives: a body over it is a 413 problem (bodyErrorHandler).
      app.use(express.json({ limit: MAX_COMMAND_BYTES, strict: false, verify: verifyUtf8Body }));
      app.use(bodyErrorHandler);
      publishOpenApiDocument(app);
    },
  });
}

main().catch(exitOnStartFailure('gateway'));
