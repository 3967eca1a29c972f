/**
 * An OpenAI-compatible chat-completions client (function calling) on the official `openai` SDK.
 *
 * It makes exactly one HTTP attempt per `complete()` call (the SDK's own retries are off) and classifies
 * every failure as a typed `ChatError`; retrying (and how long to wait) is the caller's decision, guided by
 * `isRetryable(err)` and `err.retryAfterMs`. No Temporal imports here: the activity wrapper lives elsewhere.
 */

import { types } from 'node:util';
import { APIConnectionError, APIConnectionTimeoutError, APIError, OpenAI } from 'openai';
import type { ChatCompletionCreateParamsNonStreaming } from 'openai/resources/chat/completions';
import { processMetrics, type AgentRunMetrics } from '@agentrun/telemetry';

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
  temperature?: number;
  /** Sequences that end the reply; an empty list is the same as none. */
  stop?: string[];
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
  /** Where calls are counted (`agentrun_model_*`); the process's metrics by default. */
  metrics?: AgentRunMetrics;
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
  /** The error body's `code` (e.g. `insufficient_quota`, `rate_limit_exceeded`), when the server sent one. */
  readonly code?: string;
  /** The error body's `type` (e.g. `invalid_request_error`), when the server sent one. */
  readonly type?: string;

  constructor(
    kind: ChatErrorKind,
    message: string,
    extra: { status?: number; retryAfterMs?: number; code?: string; type?: string; cause?: unknown } = {},
  ) {
    super(message, extra.cause === undefined ? undefined : { cause: extra.cause });
    this.kind = kind;
    if (extra.status !== undefined) this.status = extra.status;
    if (extra.retryAfterMs !== undefined) this.retryAfterMs = extra.retryAfterMs;
    if (extra.code !== undefined) this.code = extra.code;
    if (extra.type !== undefined) this.type = extra.type;
  }

  get retryable(): boolean {
    return RETRYABLE.has(this.kind);
  }
}

/** True for a `ChatError` worth another attempt (everything but `bad_request`); false for anything else. */
export function isRetryable(err: unknown): boolean {
  return err instanceof ChatError && err.retryable;
}

/**
 * What a failed model call says about an evaluation: `infra_error` (the model service failed or is busy:
 * 5xx, timeouts, network, unusable replies, a plain 429), `model_key_budget` (the key's quota, budget or
 * credit is spent), `model_key_auth` (401/403: the key is wrong or not allowed), or `undefined` for anything
 * else, above all another 4xx, which is the request's own fault.
 */
export type ModelErrorClass = 'infra_error' | 'model_key_budget' | 'model_key_auth';

/** Words that mark a 429 as a spent quota rather than a rate limit (`insufficient_quota` contains `quota`). */
const BUDGET_SPENT = /quota|budget|billing|credit/i;

export function classifyModelError(err: unknown): ModelErrorClass | undefined {
  if (!(err instanceof ChatError)) return undefined;
  switch (err.kind) {
    case 'server_error':
    case 'timeout':
    case 'network':
    case 'bad_response':
      return 'infra_error';
    case 'rate_limited':
      return budgetSpent(err) ? 'model_key_budget' : 'infra_error';
    case 'bad_request':
      // 402 Payment Required says by its status alone that the money is spent, whatever the body words.
      if (err.status === 402) return 'model_key_budget';
      if (err.status === 401 || err.status === 403) return 'model_key_auth';
      return undefined;
    default: {
      const unknownKind: never = err.kind;
      throw new TypeError(`classifyModelError: unknown ChatError kind '${String(unknownKind)}'`);
    }
  }
}

function budgetSpent(err: ChatError): boolean {
  // Only the server's words: the `POST <url>` prefix of the message could contain anything.
  const status = err.message.indexOf(`: HTTP ${err.status}`);
  const serverWords = status === -1 ? err.message : err.message.slice(status);
  return [err.code, err.type, serverWords].some((text) => text !== undefined && BUDGET_SPENT.test(text));
}

// ---------------------------------------------------------------------------------------------
// The client
// ---------------------------------------------------------------------------------------------

/**
 * The SDK keeps only the `error` member of a JSON error body; servers that put `message`, `type` and `code`
 * at the top level (vLLM's older replies, for one) would lose them, so such a body is passed on as `error`.
 */
class OpenAIKeepingFlatErrorBodies extends OpenAI {
  protected override makeStatusError(status: number, body: object, message: string | undefined, headers: Headers): APIError {
    const whole = isObject(body) && !('error' in body) ? { error: body } : body;
    return super.makeStatusError(status, whole, message, headers);
  }
}

export function createChatClient(options: ChatClientOptions): ChatClient {
  const { apiKey, model, timeoutMs } = options;
  if (!options.baseUrl) throw new TypeError('createChatClient: baseUrl is required');
  if (!model) throw new TypeError('createChatClient: model is required');
  if (!(Number.isFinite(timeoutMs) && timeoutMs > 0)) {
    throw new TypeError(`createChatClient: timeoutMs must be a positive number, got ${String(timeoutMs)}`);
  }
  const baseURL = options.baseUrl.replace(/\/+$/, '');
  const url = `${baseURL}/chat/completions`;
  const sdk = new OpenAIKeepingFlatErrorBodies({
    baseURL,
    // The SDK refuses to start without a key; with none given, the Authorization header is dropped instead.
    apiKey: apiKey || 'unused',
    ...(apiKey ? {} : { defaultHeaders: { Authorization: null } }),
    // Temporal's retry policy owns retries and their delays (from retryAfterMs): one attempt here.
    maxRetries: 0,
    // The SDK wants whole milliseconds; its timer stops at the response headers, the deadline below does not.
    timeout: Math.ceil(timeoutMs),
    // Set explicitly so that OPENAI_ORG_ID, OPENAI_PROJECT_ID, OPENAI_ADMIN_KEY and OPENAI_LOG change nothing.
    organization: null,
    project: null,
    adminAPIKey: null,
    logLevel: 'warn',
  });

  async function complete(request: ChatRequest, signal?: AbortSignal): Promise<ChatReply> {
    signal?.throwIfAborted();
    const attempt = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      attempt.abort(new Error(`timed out after ${timeoutMs} ms`));
    }, timeoutMs);
    const onCallerAbort = () => attempt.abort(signal?.reason);
    signal?.addEventListener('abort', onCallerAbort, { once: true });

    let body: unknown;
    try {
      body = await sdk.chat.completions.create(paramsFor(model, request), { signal: attempt.signal });
    } catch (error) {
      if (timedOut || error instanceof APIConnectionTimeoutError) {
        throw new ChatError('timeout', `POST ${url}: no complete reply within ${timeoutMs} ms`, { cause: error });
      }
      if (signal?.aborted) throw signal.reason;
      throw errorFor(url, error);
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onCallerAbort);
    }
    return readReply(url, body, model);
  }

  return { model, complete: metered(model, complete, options.metrics ?? processMetrics()) };
}

/**
 * Each call as `agentrun_model_call_duration_seconds{model,outcome}` (outcome `ok`, an error kind, or
 * `cancelled`) and its reported usage as `agentrun_model_tokens_total{model,direction}`. The model
 * label is the requested model (bounded by the metrics to a few distinct names).
 */
function metered(model: string, complete: ChatClient['complete'], metrics: AgentRunMetrics): ChatClient['complete'] {
  metrics.model();
  return async (request, signal) => {
    const started = performance.now();
    const seconds = () => (performance.now() - started) / 1000;
    try {
      const reply = await complete(request, signal);
      metrics.observeModelCall({ model, seconds: seconds(), outcome: 'ok', inputTokens: reply.usage?.prompt_tokens, outputTokens: reply.usage?.completion_tokens });
      return reply;
    } catch (err) {
      metrics.observeModelCall({ model, seconds: seconds(), outcome: err instanceof ChatError ? err.kind : 'cancelled' });
      throw err;
    }
  };
}

function paramsFor(model: string, request: ChatRequest): ChatCompletionCreateParamsNonStreaming {
  return {
    model,
    messages: request.messages,
    ...(request.tools && request.tools.length > 0 ? { tools: request.tools } : {}),
    ...(request.max_tokens !== undefined ? { max_tokens: request.max_tokens } : {}),
    ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
    ...(request.stop && request.stop.length > 0 ? { stop: request.stop } : {}),
  };
}

/** Maps what the SDK threw (timeouts and the caller's abort are handled before) to a `ChatError`. */
function errorFor(url: string, error: unknown): ChatError {
  if (error instanceof APIConnectionError) {
    return new ChatError('network', `POST ${url}: ${describeNetworkError(error.cause ?? error)}`, { cause: error });
  }
  if (error instanceof APIError && typeof error.status === 'number') return statusError(url, error, error.status);
  // The SDK reads a JSON content type with `response.json()`, which throws this for a body that is not JSON.
  if (isError(error) && error.name === 'SyntaxError') return new ChatError('bad_response', `POST ${url}: the body is not JSON (${error.message})`, { cause: error });
  // Anything else was thrown while sending or reading (a reset connection, an unexpected abort).
  return new ChatError('network', `POST ${url}: ${describeNetworkError(error)}`, { cause: error });
}

function statusError(url: string, error: APIError, status: number): ChatError {
  const detail = `POST ${url}: HTTP ${status}${serverMessage(error, status)}`;
  const retryAfterMs = error.headers ? retryAfter(error.headers) : undefined;
  const body: unknown = error.error;
  const code = isObject(body) ? textOf(body.code) : undefined;
  const type = isObject(body) ? textOf(body.type) : undefined;
  const extra = {
    status,
    cause: error,
    ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
    ...(code === undefined ? {} : { code }),
    ...(type === undefined ? {} : { type }),
  };
  if (status === 429) return new ChatError('rate_limited', detail, extra);
  if (status >= 500) return new ChatError('server_error', detail, extra);
  if (status >= 400) return new ChatError('bad_request', detail, extra);
  return new ChatError('bad_response', `${detail} (not a success status)`, extra);
}

/** `: <message>` from an OpenAI-style `{ error: { message } }` body, or a short excerpt of any other body. */
function serverMessage(error: APIError, status: number): string {
  const body: unknown = error.error;
  if (isObject(body) && typeof body.message === 'string') return `: ${body.message}`;
  if (typeof body === 'string') return `: ${body}`;
  // For a body that is not JSON the SDK's message is `<status> <body>`; for one it could not read, `(no body)`.
  const text = error.message.startsWith(`${status} `) ? error.message.slice(`${status} `.length) : error.message;
  if (/^status code \(no body\)$/.test(text)) return '';
  const excerpt = text.trim().replace(/\s+/g, ' ').slice(0, 200);
  return excerpt ? `: ${excerpt}` : '';
}

/** A body's `code` or `type` as text: OpenAI sends strings, some servers send the status number as `code`. */
function textOf(value: unknown): string | undefined {
  if (typeof value === 'string' && value) return value;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return undefined;
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

/** `instanceof Error` is false for fetch's errors where they come from another realm (as under jest). */
function isError(value: unknown): value is Error {
  return value instanceof Error || types.isNativeError(value);
}

function describeNetworkError(error: unknown): string {
  if (!isError(error)) return String(error);
  // fetch reports `TypeError: fetch failed` and keeps the interesting part (ECONNREFUSED, ...) in `cause`.
  const cause = (error as { cause?: unknown }).cause;
  if (isError(cause)) {
    const code = (cause as { code?: unknown }).code;
    return `${error.message} (${typeof code === 'string' ? `${code}: ` : ''}${cause.message})`;
  }
  return error.message;
}

/** Checks the parsed body: the SDK returns whatever the server sent (text, for a non-JSON content type). */
function readReply(url: string, body: unknown, requestedModel: string): ChatReply {
  const bad = (why: string) => new ChatError('bad_response', `POST ${url}: ${why}`);
  if (typeof body === 'string') throw bad(`the body is not JSON: ${JSON.stringify(body.slice(0, 120))}`);
  if (!isObject(body)) throw bad('the body is not a JSON object');
  const choices = body.choices;
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
    usage: readUsage(body.usage),
    model: typeof body.model === 'string' && body.model ? body.model : requestedModel,
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
