import { Injectable, type CallHandler, type ExecutionContext, type NestInterceptor } from '@nestjs/common';
import { withLogContext } from '@agentrun/telemetry';
import type { Request } from 'express';
import { Observable } from 'rxjs';

/**
 * Runs each request on a run (`/runs/:id/...`) in that run's log context: `org` as OrgGuard
 * authenticated it (guards run before interceptors) and `run_id` from the path, so whatever the
 * handler logs, a stream failing long after the request began included, names the run.
 */
@Injectable()
export class LogContextInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (context.getType() !== 'http') return next.handle();
    const req = context.switchToHttp().getRequest<Request & { org?: string }>();
    const runId = typeof req.params?.id === 'string' && req.path.startsWith('/runs/') ? req.params.id : undefined;
    if (!runId || !req.org) return next.handle();
    const scope = { org: req.org, run_id: runId };
    // The handler runs when the observable is subscribed to: subscribe inside the context.
    return new Observable((subscriber) => withLogContext(scope, () => next.handle().subscribe(subscriber)));
  }
}
