import { ArgumentsHost, Catch, HttpException, HttpStatus, Logger, NotFoundException, type ExceptionFilter } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
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
    super(problemOf(status, title, detail, extensions), status);
  }
}

/** A problem document whose `type` is named after its title. */
export function problemOf(status: number, title: string, detail: string, extensions: Record<string, unknown> = {}): Problem {
  return { type: `https://agentrun.dev/problems/${slug(title)}`, title, status, detail, ...extensions };
}

/**
 * The id an unexpected error is logged under. A client is given the id and nothing else of the
 * error: its text may name servers, paths or queries, and an operator finds it in the logs by the id.
 */
export function newErrorId(): string {
  return randomUUID();
}

/** The answer to an error nobody expected: logged in full under a new id, answered with the id alone. */
export function internalError(logger: Logger, error: unknown, what = 'the gateway failed to answer'): Problem {
  const errorId = newErrorId();
  logger.error(`error ${errorId}: ${(error as Error)?.stack ?? String(error)}`);
  return { type: 'about:blank', title: 'internal server error', status: 500, detail: `${what}; the error is logged under error id ${errorId}`, error_id: errorId };
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
    sendProblem(res, internalError(this.logger, error));
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

const bodyLogger = new Logger('http');

/**
 * Body-parser failures happen before Nest's filters; this answers them the same way. Anything else
 * that reaches it is unexpected and answered like the filter's 500: passed on, Express's own handler
 * would print the stack to the client.
 */
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
  // Too late for an answer of ours: Express's own handler ends the connection.
  if (res.headersSent) return next(err);
  sendProblem(res, internalError(bodyLogger, err));
}
