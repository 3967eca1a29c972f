import { createServer } from 'node:net';
import { Logger } from '@nestjs/common';
import { Runtime, type RuntimeOptions } from '@temporalio/worker';
import { processMetrics } from '@agentrun/telemetry';

/** A port free on the loopback interface now (the kernel's pick), for the SDK's exporter to bind. */
export async function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/** The runtime options that turn on the SDK's Prometheus exporter on a loopback address (durations in seconds). */
export function temporalRuntimeOptions(bindAddress: string, extra: Omit<RuntimeOptions, 'telemetryOptions'> = {}): RuntimeOptions {
  return {
    ...extra,
    telemetryOptions: { metrics: { prometheus: { bindAddress, useSecondsForDurations: true } } },
  };
}

let installed: Promise<string | undefined> | undefined;

/**
 * Installs the Temporal SDK's runtime once per process, before any native connection or worker
 * exists, with its Prometheus exporter on a free loopback port that `GET /metrics` reads and appends
 * (one scrape target per process). The exporter is not reachable from outside the process's host.
 * Returns the exporter's URL, or undefined when the runtime was already created elsewhere (then the
 * SDK's metrics are not exported, and that is logged).
 */
export function installTemporalRuntime(extra: Omit<RuntimeOptions, 'telemetryOptions'> = {}): Promise<string | undefined> {
  installed ??= (async () => {
    const logger = new Logger('temporal-runtime');
    const port = await freeLoopbackPort();
    const bindAddress = `127.0.0.1:${port}`;
    try {
      Runtime.install(temporalRuntimeOptions(bindAddress, extra));
    } catch (err) {
      logger.warn(`Temporal SDK metrics not exported: ${(err as Error).message}`);
      return undefined;
    }
    const url = `http://${bindAddress}/metrics`;
    processMetrics().setTemporalEndpoint(url);
    logger.log(`Temporal SDK worker metrics on ${url}, served within /metrics`);
    return url;
  })();
  return installed;
}
