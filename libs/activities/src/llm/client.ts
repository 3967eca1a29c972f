/**
 * An OpenAI-compatible chat-completions client (function calling), on Node 20's global fetch.
 *
 * It makes exactly one HTTP attempt per `complete()` call and classifies every failure as a typed
 * `ChatError`; retrying (and how long to wait) is the caller's decision, guided by `isRetryable(err)` and
 * `err.retryAfterMs`. No Temporal imports here: the activity wrapper lives elsewhere.
 */

// ---------------------------------------------------------------------------------------------
// Wire types (OpenAI's function-calling shape)
// ---------------------------------------------------------------------------------------------

/** A tool call as it travels on the wire: `arguments` is a JSON *string* written by the model. */
export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface SystemMessage {
  role: 'system';
  content: string;
}

export interface UserMessage {
  role: 'user';
  content: string;
}

export interface AssistantMessage {
  role: 'assistant';
  content: string | null;
  tool_calls?: ToolCall[];
}

export interface ToolMessage {
  role: 'tool';
  tool_call_id: string;
  content: string;
}

export type ChatMessage = SystemMessage | UserMessage | AssistantMessage | ToolMessage;

/** A tool offered to the model; `parameters` is a JSON Schema object. */
export interface ToolSpec {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown> };
}

export interface ChatRequest {
  messages: ChatMessage[];
  tools?: ToolSpec[];
  max_tokens?: number;
}

// ---------------------------------------------------------------------------------------------
// Reply types
// ---------------------------------------------------------------------------------------------

/** `(string & {})` keeps the known values in editor completion while accepting any server's value. */
export type FinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter' | (string & {});

/**
 * A tool call from the reply. `arguments` is the parsed JSON object; when the model wrote something that is
 * not a JSON object, `arguments` is the raw string, `malformed` is true and `parse_error` says why. The call
 * is returned either way (never thrown): the caller decides whether to tell the model or fail the step.
 */
export type ParsedToolCall =
  | { id: string; name: string; arguments: Record<string, unknown>; raw_arguments: string; malformed: false }
  | { id: string; name: string; arguments: string; raw_arguments: string; malformed: true; parse_error: string };

export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export interface ChatReply {
  content: string | null;
  /** Empty when the model called no tool. */
  tool_calls: ParsedToolCall[];
  /** `'length'` (truncated) is returned, not thrown. `null` only if the server sent none. */
  finish_reason: FinishReason | null;
  /** `null` when the server reported no usage. */
  usage: ChatUsage | null;
  /** The model that answered, as the server names it (falls back to the requested model). */
  model: string;
  /** The assistant message exactly as received, ready to append to the conversation for the next turn. */
  message: AssistantMessage;
}

export interface ChatClientOptions {
  /** e.g. `http://127.0.0.1:8090/v1`; `/chat/completions` is appended. Trailing slashes are ignored. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <apiKey>` when set and non-empty. */
  apiKey?: string;
  model: string;
  /** Covers the whole attempt: connecting, waiting for the headers and reading the body. */
  timeoutMs: number;
}

export interface ChatClient {
  readonly model: string;
  /**
   * One attempt. Throws a `ChatError` for every failure, except when the caller's `signal` aborts: then it
   * rethrows `signal.reason` unchanged (as fetch does), so a cancellation stays a cancellation.
   */
  complete(request: ChatRequest, signal?: AbortSignal): Promise<ChatReply>;
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

export type ChatErrorKind = 'rate_limited' | 'server_error' | 'bad_request' | 'timeout' | 'network' | 'bad_response';

const RETRYABLE: ReadonlySet<ChatErrorKind> = new Set(['rate_limited', 'server_error', 'timeout', 'network', 'bad_response']);

export class ChatError extends Error {
  override readonly name = 'ChatError';
  readonly kind: ChatErrorKind;
  /** The HTTP status, when a response arrived. */
  readonly status?: number;
  /** From `Retry-After` (seconds or an HTTP date) or `retry-after-ms`, when the server sent one. */
  readonly retryAfterMs?: number;

  constructor(kind: ChatErrorKind, message: string, extra: { status?: number; retryAfterMs?: number; cause?: unknown } = {}) {
    super(message, extra.cause === undefined ? undefined : { cause: extra.cause });
    this.kind = kind;
    if (extra.status !== undefined) this.status = extra.status;
    if (extra.retryAfterMs !== undefined) this.retryAfterMs = extra.retryAfterMs;
  }

  get retryable(): boolean {
    return RETRYABLE.has(this.kind);
  }
}

/** True for a `ChatError` worth another attempt (everything but `bad_request`); false for anything else. */
export function isRetryable(err: unknown): boolean {
  return err instanceof ChatError && err.retryable;
}

// ---------------------------------------------------------------------------------------------
// The client
// ---------------------------------------------------------------------------------------------

export function createChatClient(options: ChatClientOptions): ChatClient {
  const { apiKey, model } = options;
  if (!options.baseUrl) throw new TypeError('createChatClient: baseUrl is required');
  if (!model) throw new TypeError('createChatClient: model is required');
  if (!(Number.isFinite(options.timeoutMs) && options.timeoutMs > 0)) {
    throw new TypeError(`createChatClient: timeoutMs must be a positive number, got ${String(options.timeoutMs)}`);
  }
  const url = `${options.baseUrl.replace(/\/+$/, '')}/chat/completions`;
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
  if (apiKey) headers.authorization = `Bearer ${apiKey}`;

  async function complete(request: ChatRequest, signal?: AbortSignal): Promise<ChatReply> {
    signal?.throwIfAborted();
    const body: Record<string, unknown> = { model, messages: request.messages };
    if (request.tools && request.tools.length > 0) body.tools = request.tools;
    if (request.max_tokens !== undefined) body.max_tokens = request.max_tokens;
    const payload = JSON.stringify(body);

    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new Error(`timed out after ${options.timeoutMs} ms`));
    }, options.timeoutMs);
    const onCallerAbort = () => controller.abort(signal?.reason);
    signal?.addEventListener('abort', onCallerAbort, { once: true });

    let status: number;
    let responseHeaders: Headers;
    let text: string;
    try {
      const response = await fetch(url, { method: 'POST', headers, body: payload, signal: controller.signal });
      status = response.status;
      responseHeaders = response.headers;
      text = await response.text();
    } catch (error) {
      if (timedOut) throw new ChatError('timeout', `POST ${url}: no complete reply within ${options.timeoutMs} ms`, { cause: error });
      if (signal?.aborted) throw signal.reason;
      throw new ChatError('network', `POST ${url}: ${describeNetworkError(error)}`, { cause: error });
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onCallerAbort);
    }

    if (status < 200 || status > 299) throw errorFor(url, status, responseHeaders, text);
    return readReply(url, text, model);
  }

  return { model, complete };
}

function errorFor(url: string, status: number, headers: Headers, text: string): ChatError {
  const detail = `POST ${url}: HTTP ${status}${serverMessage(text)}`;
  const retryAfterMs = retryAfter(headers);
  const extra = { status, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) };
  if (status === 429) return new ChatError('rate_limited', detail, extra);
  if (status >= 500) return new ChatError('server_error', detail, extra);
  if (status >= 400) return new ChatError('bad_request', detail, extra);
  return new ChatError('bad_response', `${detail} (not a success status)`, extra);
}

/** `: <message>` from an OpenAI-style `{ error: { message } }` body, or a short excerpt of any other body. */
function serverMessage(text: string): string {
  try {
    const parsed = JSON.parse(text) as unknown;
    if (isObject(parsed)) {
      const err = parsed.error;
      if (isObject(err) && typeof err.message === 'string') return `: ${err.message}`;
      if (typeof err === 'string') return `: ${err}`;
    }
  } catch {
    // not JSON: fall through to the excerpt
  }
  const excerpt = text.trim().replace(/\s+/g, ' ').slice(0, 200);
  return excerpt ? `: ${excerpt}` : '';
}

/** `retry-after-ms` (milliseconds), else `Retry-After` as delta-seconds or an HTTP date. */
export function retryAfter(headers: Headers): number | undefined {
  const ms = headers.get('retry-after-ms');
  if (ms !== null && /^\s*\d+(\.\d+)?\s*$/.test(ms)) return Math.ceil(Number(ms));
  const value = headers.get('retry-after');
  if (value === null) return undefined;
  if (/^\s*\d+(\.\d+)?\s*$/.test(value)) return Math.ceil(Number(value) * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

function describeNetworkError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  // fetch reports `TypeError: fetch failed` and keeps the interesting part (ECONNREFUSED, ...) in `cause`.
  const cause = (error as { cause?: unknown }).cause;
  if (cause instanceof Error) {
    const code = (cause as { code?: unknown }).code;
    return `${error.message} (${typeof code === 'string' ? `${code}: ` : ''}${cause.message})`;
  }
  return error.message;
}

function readReply(url: string, text: string, requestedModel: string): ChatReply {
  const bad = (why: string) => new ChatError('bad_response', `POST ${url}: ${why}`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw bad(`the body is not JSON: ${JSON.stringify(text.slice(0, 120))}`);
  }
  if (!isObject(parsed)) throw bad('the body is not a JSON object');
  const choices = parsed.choices;
  if (!Array.isArray(choices) || choices.length === 0) throw bad('the reply has no choices');
  const choice: unknown = choices[0];
  if (!isObject(choice) || !isObject(choice.message)) throw bad('choices[0] has no message');
  const raw = choice.message;

  const content = raw.content;
  if (content !== undefined && content !== null && typeof content !== 'string') throw bad('choices[0].message.content is not a string');

  const wireCalls: ToolCall[] = [];
  if (raw.tool_calls !== undefined && raw.tool_calls !== null) {
    if (!Array.isArray(raw.tool_calls)) throw bad('choices[0].message.tool_calls is not an array');
    for (const [i, call] of (raw.tool_calls as unknown[]).entries()) {
      const fn = isObject(call) ? call.function : undefined;
      if (!isObject(call) || typeof call.id !== 'string' || !isObject(fn) || typeof fn.name !== 'string') {
        throw bad(`tool_calls[${i}] lacks an id or a function name`);
      }
      const args = fn.arguments;
      // A missing `arguments` is passed on as an empty string (and so reported as malformed below).
      const rawArgs = typeof args === 'string' ? args : args === undefined || args === null ? '' : JSON.stringify(args);
      wireCalls.push({ id: call.id, type: 'function', function: { name: fn.name, arguments: rawArgs } });
    }
  }

  const finish = choice.finish_reason;
  const message: AssistantMessage = { role: 'assistant', content: typeof content === 'string' ? content : null };
  if (wireCalls.length > 0) message.tool_calls = wireCalls;
  return {
    content: message.content,
    tool_calls: wireCalls.map(parseToolCall),
    finish_reason: typeof finish === 'string' ? finish : null,
    usage: readUsage(parsed.usage),
    model: typeof parsed.model === 'string' && parsed.model ? parsed.model : requestedModel,
    message,
  };
}

/** Parses a wire tool call's arguments; anything but a JSON object is flagged `malformed`, never thrown. */
export function parseToolCall(call: ToolCall): ParsedToolCall {
  const base = { id: call.id, name: call.function.name, raw_arguments: call.function.arguments };
  let value: unknown;
  try {
    value = JSON.parse(call.function.arguments);
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    return { ...base, arguments: call.function.arguments, malformed: true, parse_error: why };
  }
  if (!isObject(value)) {
    const got = value === null ? 'null' : Array.isArray(value) ? 'an array' : `a ${typeof value}`;
    return { ...base, arguments: call.function.arguments, malformed: true, parse_error: `arguments must be a JSON object, got ${got}` };
  }
  return { ...base, arguments: value, malformed: false };
}

function readUsage(usage: unknown): ChatUsage | null {
  if (!isObject(usage)) return null;
  const n = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
  const prompt = n(usage.prompt_tokens);
  const completion = n(usage.completion_tokens);
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: typeof usage.total_tokens === 'number' ? usage.total_tokens : prompt + completion,
  };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
