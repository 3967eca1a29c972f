import { Controller, Get, HttpException, HttpStatus, Inject, Injectable } from '@nestjs/common';
import { fatalFailure } from './fatal';

/** One dependency a service needs before it can do its work. */
export interface ReadinessCheck {
  readonly name: string;
  check(): Promise<void>;
}

export const READINESS_CHECKS = Symbol('READINESS_CHECKS');

@Injectable()
export class Readiness {
  private stopping = false;

  constructor(@Inject(READINESS_CHECKS) private readonly checks: ReadinessCheck[]) {}

  /** Once shutdown starts, readiness fails so load balancers stop sending work. */
  markStopping(): void {
    this.stopping = true;
  }

  async report(): Promise<{ ready: boolean; checks: Record<string, string> }> {
    const results: Record<string, string> = {};
    await Promise.all(
      this.checks.map(async (c) => {
        try {
          await withTimeout(c.check(), 2_000, `${c.name} did not answer in 2s`);
          results[c.name] = 'ok';
        } catch (err) {
          results[c.name] = (err as Error).message || 'failed';
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
  constructor(private readonly readiness: Readiness) {}

  /** The process is up and its event loop turns. */
  @Get('livez')
  livez(): { status: 'ok' } {
    const fatal = fatalFailure();
    if (fatal) throw new HttpException({ status: 'failed', reason: fatal }, HttpStatus.SERVICE_UNAVAILABLE);
    return { status: 'ok' };
  }

  /** Every dependency this service needs answers. */
  @Get('readyz')
  async readyz(): Promise<{ status: 'ready'; checks: Record<string, string> }> {
    const report = await this.readiness.report();
    if (!report.ready) throw new HttpException({ status: 'not_ready', checks: report.checks }, HttpStatus.SERVICE_UNAVAILABLE);
    return { status: 'ready', checks: report.checks };
  }
}
