import { Logger } from '@nestjs/common';

let fatalReason: string | undefined;

/**
 * Something the service cannot do without has stopped for good (e.g. a Temporal worker died):
 * liveness fails and the service drains and exits non-zero, so its supervisor restarts it.
 */
export function failFast(reason: string): void {
  if (fatalReason) return;
  fatalReason = reason;
  new Logger('runtime').error(`fatal: ${reason}; stopping`);
  process.kill(process.pid, 'SIGTERM');
}

export function fatalFailure(): string | undefined {
  return fatalReason;
}
