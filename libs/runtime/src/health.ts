import { Controller, Get, Header, HttpException, HttpStatus, Inject, Injectable, Logger } from '@nestjs/common';
import { PROMETHEUS_CONTENT_TYPE, processMetrics, type AgentRunMetrics } from '@agentrun/telemetry';
import { fatalFailure } from './fatal';

/** One dependency a service needs before it can do its work. */
export interface ReadinessCheck {
  readonly name: string;
  check(): Promise<void>;
}

export const READINESS_CHECKS = Symbol('READINESS_CHECKS');

/** What /readyz says of one check: whether it passed, never why not (that is in the logs). */
export type CheckResult = 'ok' | 'failed' | 'stopping';

/**
 * The service's readiness, as probes see it. /readyz needs no credentials, so it names each check and
 * whether it passed, and nothing of a failure: a dependency's error can carry addresses, user names or
 * queries. Each failure is logged instead, once when it starts or changes, and a recovery once too, so
 * a probe every few seconds does not flood the log.
 */
@Injectable()
export class Readiness {
  private stopping = false;
  private readonly logger = new Logger('readiness');
  /** The last failure logged per check, until it passes again. */
  private readonly failing = new Map<string, string>();

  constructor(@Inject(READINESS_CHECKS) private readonly checks: ReadinessCheck[]) {}

  /** Once shutdown starts, readiness fails so load balancers stop sending work. */
  markStopping(): void {
    this.stopping = true;
  }

  async report(): Promise<{ ready: boolean; checks: Record<string, CheckResult> }> {
    const results: Record<string, CheckResult> = {};
    await Promise.all(
      this.checks.map(async (c) => {
        try {
          await withTimeout(c.check(), 2_000, `${c.name} did not answer in 2s`);
          results[c.name] = 'ok';
          if (this.failing.delete(c.name)) this.logger.log(`${c.name} is ready again`);
        } catch (err) {
          results[c.name] = 'failed';
          const reason = (err as Error)?.message || String(err) || 'failed';
          if (this.failing.get(c.name) !== reason) this.logger.warn(`${c.name} is not ready: ${reason}`);
          this.failing.set(c.name, reason);
        }
      }),
    );
    if (this.stopping) results.shutdown = 'stopping';
    return { ready: !this.stopping && Object.values(results).every((v) => v === 'ok'), checks: results };
  }
}

async function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(message)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

@Controller()
export class HealthController {
  private readonly metricsOf: AgentRunMetrics;

  constructor(private readonly readiness: Readiness) {
    this.metricsOf = processMetrics();
    this.metricsOf.readiness(() => this.readiness.report());
  }

  /** The process is up and its event loop turns. A fatal failure's reason was logged by failFast; the answer says only that it failed. */
  @Get('livez')
  livez(): { status: 'ok' } {
    if (fatalFailure()) throw new HttpException({ status: 'failed' }, HttpStatus.SERVICE_UNAVAILABLE);
    return { status: 'ok' };
  }

  /** Every dependency this service needs answers: each check by name, `ok` or `failed` (why is logged). */
  @Get('readyz')
  async readyz(): Promise<{ status: 'ready'; checks: Record<string, CheckResult> }> {
    const report = await this.readiness.report();
    if (!report.ready) throw new HttpException({ status: 'not_ready', checks: report.checks }, HttpStatus.SERVICE_UNAVAILABLE);
    return { status: 'ready', checks: report.checks };
  }

  /**
   * Prometheus' text format: this process's metrics (only those it emits) and, in a process with
   * Temporal workers, the SDK runtime's own worker metrics after them. No credentials, like the
   * probes: no label names a run or an org.
   */
  @Get('metrics')
  @Header('Content-Type', PROMETHEUS_CONTENT_TYPE)
  @Header('Cache-Control', 'no-store')
  async metrics(): Promise<string> {
    return this.metricsOf.exposition();
  }
}
