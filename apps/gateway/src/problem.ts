import { ArgumentsHost, Catch, HttpException, HttpStatus, Logger, NotFoundException, type ExceptionFilter } from '@nestjs/common';
import type { Problem } from '@agentrun/contracts';
import { decodeUtf8 } from '@agentrun/contracts/validation';
import type { NextFunction, Request, Response } from 'express';
import { allowedMethods } from './allowed-methods';

/** An RFC 9457 problem document; its shape is declared in the contracts. */
export type { Problem };

export class ProblemException extends HttpException {
  constructor(
    status: number,
    title: string,
    detail: string,
    extensions: Record<string, unknown> = {},
    /** Response headers that go with the problem, e.g. `WWW-Authenticate` on a 401. */
    readonly headers: Record<string, string> = {},
  ) {
    const problem: Problem = { type: `https://agentrun.dev/problems/${slug(title)}`, title, status, detail, ...extensions };
    super(problem, status);
  }
}

function slug(title: string): string {
  return title.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '');
}

export function sendProblem(res: Response, problem: Problem, headers: Record<string, string> = {}): void {
  for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
  res.status(problem.status).type('application/problem+json').send(JSON.stringify(problem));
}

function titleFor(status: number): string {
  return (HttpStatus[status] ?? 'error').toString().toLowerCase().replace(/_/g, ' ');
}

/** Every error leaves the gateway as `application/problem+json`. */
@Catch()
export class ProblemFilter implements ExceptionFilter {
  private readonly logger = new Logger('http');

  catch(error: unknown, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse<Response>();
    if (res.headersSent) {
      res.end();
      return;
    }
    // Nest answers a request no route took with a plain NotFoundException (ours are problems). When
    // the path exists under other methods, the honest answer is 405 and what is allowed.
    if (error instanceof NotFoundException) {
      const req = host.switchToHttp().getRequest<Request>();
      const allowed = allowedMethods(req);
      if (allowed.length > 0 && !allowed.includes(req.method)) {
        sendProblem(
          res,
          { type: 'about:blank', title: 'method not allowed', status: 405, detail: `${req.method} is not supported on ${req.path}; allowed: ${allowed.join(', ')}` },
          { Allow: allowed.join(', ') },
        );
        return;
      }
    }
    if (error instanceof HttpException) {
      const status = error.getStatus();
      const body = error.getResponse();
      if (typeof body === 'object' && body !== null && 'type' in body && 'detail' in body) {
        const headers = error instanceof ProblemException ? { ...error.headers } : {};
        if (status === 503) headers['Retry-After'] ??= '2';
        sendProblem(res, body as Problem, headers);
        return;
      }
      const message = typeof body === 'string' ? body : ((body as { message?: unknown }).message ?? error.message);
      sendProblem(res, {
        type: 'about:blank',
        title: titleFor(status),
        status,
        detail: Array.isArray(message) ? message.join('; ') : String(message),
      });
      return;
    }
    this.logger.error((error as Error)?.stack ?? String(error));
    sendProblem(res, { type: 'about:blank', title: 'internal server error', status: 500, detail: 'the gateway failed to answer; the error is logged' });
  }
}

/**
 * The JSON parser's `verify` hook: a UTF-8 body whose bytes are not UTF-8 is a 400. Without it the
 * parser reads bad bytes as U+FFFD and the run stores text the client never sent.
 */
export function verifyUtf8Body(_req: unknown, _res: unknown, body: Buffer, encoding: string): void {
  if (encoding.toLowerCase().replace('-', '') !== 'utf8' || decodeUtf8(body) !== undefined) return;
  throw Object.assign(new Error('request body is not valid UTF-8'), { status: 400, type: 'entity.verify.failed' });
}

/** Body-parser failures happen before Nest's filters; this answers them the same way. */
export function bodyErrorHandler(err: { type?: string; status?: number; message?: string; limit?: number }, _req: Request, res: Response, next: NextFunction): void {
  if (err.type === 'entity.too.large') {
    sendProblem(res, { type: 'about:blank', title: 'payload too large', status: 413, detail: `request body exceeds the ${err.limit ?? 65536}-byte limit` });
    return;
  }
  if (err.type === 'entity.parse.failed') {
    sendProblem(res, { type: 'about:blank', title: 'bad request', status: 400, detail: `request body is not valid JSON: ${err.message}` });
    return;
  }
  if (err.status && err.status >= 400 && err.status < 500) {
    sendProblem(res, { type: 'about:blank', title: titleFor(err.status), status: err.status, detail: err.message ?? 'bad request' });
    return;
  }
  next(err);
}
