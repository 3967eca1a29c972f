/**
 * The HTTP plumbing both model servers share (the scripted one in model-server.ts and the real one in
 * real/server.ts): the capped body read, JSON replies, the OpenAI-style error body, the server-sent-event
 * frames of a streamed completion, a message's text, and listening.
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

/** What every chunk of one streamed completion carries. */
export interface ReplyMeta {
  id: string;
  /** Unix seconds. */
  created: number;
  model: string;
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** One piece of a tool call in a chunk's `delta.tool_calls`: `id`, `type` and the function's name come in its first piece only. */
export interface ToolCallDelta {
  index: number;
  id?: string;
  type?: 'function';
  function: { name?: string; arguments: string };
}

/**
 * The frames of one streamed completion, in order: `first()` (the assistant role), `text()` per piece of
 * content, `toolCall()` per piece of a tool call, `finish()` (an empty delta with the finish reason),
 * `usage()` when the request asked for it, then `done()`. With `include_usage`, every chunk before the usage
 * chunk carries `usage: null`, as OpenAI does.
 */
export function streamFrames(meta: ReplyMeta, includeUsage: boolean) {
  const chunk = (delta: Record<string, unknown>, finish: string | null) =>
    sseFrame({
      id: meta.id,
      object: 'chat.completion.chunk',
      created: meta.created,
      model: meta.model,
      choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }],
      ...(includeUsage ? { usage: null } : {}),
    });
  return {
    first: () => chunk({ role: 'assistant', content: '' }, null),
    text: (content: string) => chunk({ content }, null),
    toolCall: (piece: ToolCallDelta) => chunk({ tool_calls: [piece] }, null),
    finish: (finish: string) => chunk({}, finish),
    usage: (usage: Usage) => sseFrame({ id: meta.id, object: 'chat.completion.chunk', created: meta.created, model: meta.model, choices: [], usage }),
    /** An error after the 200 went out: the stream can only say so in a frame of its own. */
    error: (message: string, type: string) => sseFrame(errorBody(message, type)),
    done: () => 'data: [DONE]\n\n',
  };
}

function sseFrame(data: unknown): string {
  // JSON.stringify never writes a raw newline, so one `data:` line is always the whole event.
  return `data: ${JSON.stringify(data)}\n\n`;
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
