/**
 * The HTTP plumbing both model servers share (the scripted one in model-server.ts and the real one in
 * real/server.ts): the capped body read, JSON replies, the OpenAI-style error body, a message's text, and
 * listening.
 * Only `node:http` types are imported, so real/protocol.ts stays free of Node values.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** The largest request body either server reads; a larger one is answered 413. */
export const MAX_BODY_BYTES = 1024 * 1024;

/**
 * The body as text, or `null` when it passes `MAX_BODY_BYTES`. The rest of an oversized body is read and
 * dropped (so the 413 reaches a client still writing) up to 64 times the cap, past which the socket is cut.
 */
export function readBody(req: IncomingMessage): Promise<string | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
      else if (size > 64 * MAX_BODY_BYTES) req.destroy();
      else chunks.length = 0;
    });
    req.on('end', () => resolve(size > MAX_BODY_BYTES ? null : Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

/** A JSON reply; nothing when a reply already went out or the client is gone. */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

/** An error as OpenAI writes it: `{ error: { message, type, param, code } }`. */
export function errorBody(message: string, type: string, param: string | null = null, code: string | null = null): { error: { message: string; type: string; param: string | null; code: string | null } } {
  return { error: { message, type, param, code } };
}

/**
 * A chat message's `content` as text: a string as it is, null or absent as '', an array of parts as their
 * `text` joined by newlines; undefined when it is none of these. A part that is not text (an image) is
 * skipped by the scripted server, which only reads directives, and refused by the real one, which cannot
 * see it and must not answer as if it had.
 */
export function messageText(content: unknown, otherParts: 'skip' | 'refuse'): string | undefined {
  if (content === undefined || content === null) return '';
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return undefined;
  const parts: string[] = [];
  for (const part of content as unknown[]) {
    if (typeof part !== 'object' || part === null || Array.isArray(part)) return undefined;
    const { type, text } = part as { type?: unknown; text?: unknown };
    // Skipping, any part with a string `text` counts; refusing, only an untyped or `type: 'text'` one does.
    if (typeof text === 'string' && (otherParts === 'skip' || type === undefined || type === 'text')) parts.push(text);
    else if (otherParts === 'refuse') return undefined;
  }
  return parts.join('\n');
}

/** 405 with `Allow`; the request's body is drained so the connection can be reused. */
export function methodNotAllowed(req: IncomingMessage, res: ServerResponse, allowed: string): void {
  req.resume();
  sendJson(res, 405, errorBody(`use ${allowed} here, not ${req.method ?? '?'}`, 'invalid_request_error', null, 'method_not_allowed'), { allow: allowed });
}

/** The request's path without query and trailing slashes (`/v1/models/` and `/v1/models?x` are `/v1/models`). */
export function routePath(req: IncomingMessage): string {
  return (req.url ?? '/').split('?')[0].replace(/\/+$/, '') || '/';
}

/** Listens on `port` (0 picks a free one) and resolves with the port taken and the base URL a client uses. */
export async function listen(server: Server, port: number, host: string): Promise<{ port: number; url: string }> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const taken = (server.address() as AddressInfo).port;
  return { port: taken, url: `http://${host.includes(':') ? `[${host}]` : host}:${taken}/v1` };
}
