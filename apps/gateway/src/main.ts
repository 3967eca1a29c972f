import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { exitOnStartFailure, runService, useServiceLogging } from '@agentrun/runtime';
import { httpTracing } from '@agentrun/telemetry';
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
  useServiceLogging('gateway', config);
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
    tracing: config,
    logging: config,
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
      // The command routes continue the request's `traceparent` (W3C): the decision, the workflow start
      // and the run's events join the caller's trace. After the body parser, so the span is the handler's.
      app.use(httpTracing(isCommandRoute));
      publishOpenApiDocument(app);
    },
  });
}

/** The routes that send a command (commands.controller.ts): every POST to /agents, /evals and /runs/{id}/{action}. */
function isCommandRoute(method: string, path: string): boolean {
  return method === 'POST' && /^\/(agents|evals|runs\/[^/]+\/[a-z-]+)\/?$/.test(path);
}

main().catch(exitOnStartFailure('gateway'));
