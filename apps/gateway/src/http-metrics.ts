import type { NextFunction, Request, Response } from 'express';
import { processMetrics, type AgentRunMetrics } from '@agentrun/telemetry';

/** Methods labelled by name; any other is `other`, so a client cannot mint label values. */
const METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/**
 * The route a request matched, as its template (`/runs/:id/events`), never the raw path, which
 * carries run ids; `unmatched` when no route took it (404s, 405s, a 421 from the Host check).
 */
export function routeLabel(req: Pick<Request, 'route' | 'baseUrl'>): string {
  const path = (req.route as { path?: unknown } | undefined)?.path;
  return typeof path === 'string' ? `${req.baseUrl ?? ''}${path}` : 'unmatched';
}

export function methodLabel(method: string): string {
  const upper = method.toUpperCase();
  return METHODS.has(upper) ? upper : 'other';
}

/**
 * The first middleware: counts every request once its answer is finished (or its connection closed,
 * an SSE stream's end) as `agentrun_http_requests_total` and `agentrun_http_request_duration_seconds`,
 * labelled by route template, method and status.
 */
export function httpMetrics(metrics: AgentRunMetrics = processMetrics()) {
  const { requests, duration } = metrics.http();
  return (req: Request, res: Response, next: NextFunction): void => {
    const started = process.hrtime.bigint();
    let recorded = false;
    const record = (): void => {
      if (recorded) return;
      recorded = true;
      const labels = { route: routeLabel(req), method: methodLabel(req.method), status: String(res.statusCode) };
      requests.inc(labels);
      duration.observe(labels, Number(process.hrtime.bigint() - started) / 1e9);
    };
    res.once('finish', record);
    res.once('close', record);
    next();
  };
}
