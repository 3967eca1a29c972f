import { Logger, type DynamicModule, type INestApplication, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { CustomTransportStrategy } from '@nestjs/microservices';
import { initTracing, shutdownTracing, type TracingSettings } from '@agentrun/telemetry';
import { loadConfig, loggingSpec, type LoggingConfig } from '@agentrun/config';
import { installLogging, loggingInstalled, type NestPinoLogger } from '@agentrun/telemetry';
import { fatalFailure } from './fatal';
import { Readiness } from './health';

export interface ServiceOptions {
  name: string;
  port: number;
  host?: string;
  /** Longest a graceful stop may take before the process exits anyway. */
  shutdownGraceMs: number;
  /** False when the service installs its own body parser (the gateway does, for its limits and errors). */
  bodyParser?: boolean;
  configure?: (app: INestApplication) => void | Promise<void>;
  /** Message transports the app's `@EventPattern` handlers run on (typically taken from its providers). */
  transports?: (app: INestApplication) => CustomTransportStrategy[];
  /** The OTEL_* settings (libs/config `tracingSpec`): traces are exported only when they ask for it. */
  tracing?: TracingSettings;
  /** How it logs (LOG_FORMAT, LOG_LEVEL: the app's loggingSpec settings). */
  logging: LoggingConfig;
}

let installed: { key: string; service: NestPinoLogger } | undefined;

/**
 * Makes every Nest `Logger` of the process write the service's lines (JSON or text, see loggingSpec):
 * call it first thing in main when the app logs before runService, which calls it too.
 * `name` may carry a role (`orchestrator (commands)`); the lines' `service` is the app's name.
 */
export function useServiceLogging(name: string, config: Partial<LoggingConfig>): NestPinoLogger {
  const service = name.split(' (')[0];
  const key = `${service}|${config.LOG_FORMAT}|${config.LOG_LEVEL}`;
  if (installed?.key !== key) installed = { key, service: installLogging({ service, format: config.LOG_FORMAT ?? 'text', level: config.LOG_LEVEL ?? 'info' }) };
  return installed.service;
}

/**
 * Starts a service: its module, its message transports, its HTTP port (health and, for the gateway,
 * the API), and a clean stop on SIGTERM/SIGINT that drains consumers and workers through Nest's
 * shutdown: module hooks, then the transports (a consumer leaves its group once its call in flight
 * returns), then the connections they used.
 */
export async function runService(module: Type<unknown> | DynamicModule, options: ServiceOptions): Promise<INestApplication> {
  const loggerService = useServiceLogging(options.name, options.logging);
  const logger = new Logger(options.name);
  // Before any provider makes a client or a worker: they pick up the tracer provider registered here.
  const tracing = initTracing(options.name.split(' ')[0], options.tracing ?? {});
  if (tracing.exporting) logger.log(`exporting traces over OTLP/HTTP as ${String(tracing.resource.attributes['service.name'])}`);
  const app = await NestFactory.create(module, {
    bodyParser: options.bodyParser ?? true,
    // Long-lived responses (SSE) would otherwise hold the HTTP server open through a shutdown;
    // clients reconnect with Last-Event-ID.
    forceCloseConnections: true, bufferLogs: false, logger: loggerService });
  await options.configure?.(app);
  let stopping = false;
  const stop = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    logger.log(`${signal} received: draining`);
    app.get(Readiness).markStopping();
    const deadline = setTimeout(() => {
      logger.error(`did not stop within ${options.shutdownGraceMs} ms; exiting`);
      process.exit(1);
    }, options.shutdownGraceMs);
    deadline.unref();
    try {
      await app.close();
      // Spans of the last messages and activities leave before the process does.
      await shutdownTracing().catch((err: Error) => logger.warn(`traces not flushed: ${err.message}`));
      logger.log('stopped cleanly');
      process.exitCode = fatalFailure() ? 1 : 0;
    } catch (err) {
      logger.error(`error while stopping: ${(err as Error).message ?? String(err)}`, err);
      process.exitCode = 1;
    }
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
  for (const strategy of options.transports?.(app) ?? []) app.connectMicroservice({ strategy });
  // Every provider is up (database migrated, Temporal connected) before the first message arrives.
  await app.init();
  await app.startAllMicroservices();
  await app.listen(options.port, options.host ?? '127.0.0.1');
  logger.log(`listening on http://${options.host ?? '127.0.0.1'}:${options.port} (livez, readyz, metrics)`);
  return app;
}

/**
 * Top-level failure of a service's start: say why (with the stack, in the service's log format, read
 * from the environment when the failure came before the configuration was loaded) and exit non-zero.
 */
export function exitOnStartFailure(name: string): (err: unknown) => never {
  return (err) => {
    if (!loggingInstalled()) useServiceLogging(name, loggingFromEnv());
    // An error's message is the first line of its stack, which the logger writes with it: once, not twice.
    if (err instanceof Error) new Logger(name).error('failed to start', err);
    else new Logger(name).error(`failed to start: ${String(err)}`);
    process.exit(1);
  };
}

function loggingFromEnv(): Partial<LoggingConfig> {
  try {
    return loadConfig(loggingSpec);
  } catch {
    return {};
  }
}
