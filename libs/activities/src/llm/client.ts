/**
 * An OpenAI-compatible chat-completions client (function calling) on the official `openai` SDK.
 *
 * It makes exactly one HTTP attempt per `complete()` call (the SDK's own retries are off) and classifies
 * every failure as a typed `ChatError`; retrying (and how long to wait) is the caller's decision, guided by
 * `isRetryable(err)` and `err.retryAfterMs`. No Temporal imports here: the activity wrapper lives elsewhere.
 * A call may stream its reply (`ChatStream`): the content reaches the caller as it is written, and the reply
 * returned is the same as without streaming.
 */

import { types } from 'node:util';
import { APIConnectionError, APIConnectionTimeoutError, APIError, OpenAI } from 'openai';
import type { ChatCompletionCreateParamsNonStreaming } from 'openai/resources/chat/completions';
import { inModelCallSpan, processMetrics, type AgentRunMetrics } from '@agentrun/telemetry';

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
  /** Covers the whole attempt: connecting, waiting for the headers and reading the body (all of a stream). */
  timeoutMs: number;
  /** Where calls are counted (`agentrun_model_*`); the process's metrics by default. */
  metrics?: AgentRunMetrics;
}

/** Where a streamed reply's content goes as it arrives (see `ChatClient.complete`). */
export interface ChatStream {
  /**
   * Called for each non-empty piece of the reply's content, in order, as it arrives. It is called while the
   * stream is read and not awaited. If it throws, the call stops reading, drops the connection and fails
   * with that exception as it is (not a `ChatError`): a fault of the consumer is neither hidden nor taken
   * for the model's, to be retried.
   */
  onDelta(delta: string): void;
}

export interface ChatClient {
  readonly model: string;
  /**
   * One attempt. Throws a `ChatError` for every failure, except when the caller's `signal` aborts: then it
   * rethrows `signal.reason` unchanged (as fetch does), so a cancellation stays a cancellation.
   *
   * With `stream`, the reply is asked for as a stream (`stream: true`, the usage in a last chunk) and its
   * content goes to `stream.onDelta` as it arrives; the reply returned is the one the call would give
   * without `stream` (tool calls assembled from their pieces; `content` null when no piece had any text).
   * Errors are the same too (a 429 before the stream is `rate_limited`; the timeout covers reading the whole
   * stream), and a stream adds three: a chunk that cannot be read, or a stream that ends before its finish
   * reason, is `bad_response`; an error sent in the stream is `server_error`; a connection cut mid-stream
   * is `network`.
   */
  complete(request: ChatRequest, signal?: AbortSignal, stream?: ChatStream): Promise<ChatReply>;
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

  async function completeOnce(request: ChatRequest, signal?: AbortSignal, stream?: ChatStream): Promise<ChatReply> {
    signal?.throwIfAborted();
    const attempt = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      attempt.abort(new Error(`timed out after ${timeoutMs} ms`));
    }, timeoutMs);
    const onCallerAbort = () => attempt.abort(signal?.reason);
    signal?.addEventListener('abort', onCallerAbort, { once: true });
    /** What the call throws for what the SDK threw. */
    const failure = (error: unknown): unknown => {
      if (timedOut || error instanceof APIConnectionTimeoutError) {
        return new ChatError('timeout', `POST ${url}: no complete reply within ${timeoutMs} ms`, { cause: error });
      }
      if (signal?.aborted) return signal.reason;
      return errorFor(url, error);
    };

    try {
      if (!stream) {
        const body: unknown = await sdk.chat.completions.create(paramsFor(model, request), { signal: attempt.signal }).catch((error: unknown) => {
          throw failure(error);
        });
        return readReply(url, body, model);
      }
      const chunks = await sdk.chat.completions
        .create({ ...paramsFor(model, request), stream: true, stream_options: { include_usage: true } }, { signal: attempt.signal })
        .catch((error: unknown) => {
          throw failure(error);
        });
      return await readStream(url, chunks, model, stream, attempt.signal, failure);
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onCallerAbort);
    }
  }

  // Every call (agent steps, eval generate and judge calls) is a span by the OpenTelemetry GenAI conventions.
  const serverAddress = safeHost(baseURL);
  function complete(request: ChatRequest, signal?: AbortSignal, stream?: ChatStream): Promise<ChatReply> {
    return inModelCallSpan(
      model,
      async (record) => {
        const reply = await completeOnce(request, signal, stream);
        record({
          ...(reply.usage ? { input_tokens: reply.usage.prompt_tokens, output_tokens: reply.usage.completion_tokens } : {}),
          responseModel: reply.model,
          ...(reply.finish_reason ? { finishReasons: [reply.finish_reason] } : {}),
        });
        return reply;
      },
      { errorType: (err) => (err instanceof ChatError ? err.kind : signal?.aborted ? 'cancelled' : err instanceof Error ? err.name : '_OTHER'), ...(serverAddress ? { serverAddress } : {}) },
    );
  }

  return { model, complete: metered(model, complete, options.metrics ?? processMetrics()) };
}

/**
 * Each call as `agentrun_model_call_duration_seconds{model,outcome}` (outcome `ok`, an error kind,
 * `cancelled`, or `on_delta_error` when a stream's `onDelta` threw) and its reported usage as
 * `agentrun_model_tokens_total{model,direction}`. The model label is the requested model (bounded by the
 * metrics to a few distinct names).
 */
function metered(model: string, complete: ChatClient['complete'], metrics: AgentRunMetrics): ChatClient['complete'] {
  metrics.model();
  return async (request, signal, stream) => {
    const started = performance.now();
    const seconds = () => (performance.now() - started) / 1000;
    try {
      const reply = await complete(request, signal, stream);
      metrics.observeModelCall({ model, seconds: seconds(), outcome: 'ok', inputTokens: reply.usage?.prompt_tokens, outputTokens: reply.usage?.completion_tokens });
      return reply;
    } catch (err) {
      // Anything but a ChatError is the caller's abort or, streaming, its `onDelta` throwing.
      const outcome = err instanceof ChatError ? err.kind : stream && !signal?.aborted ? 'on_delta_error' : 'cancelled';
      metrics.observeModelCall({ model, seconds: seconds(), outcome });
      throw err;
    }
  };
}

function safeHost(url: string): string | undefined {
  try {
    return new URL(url).hostname;
  } catch {
    return undefined;
  }
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
  // An APIError without a status is an `error` the server sent in a stream it had begun with a 200.
  if (error instanceof APIError) {
    const body: unknown = error.error;
    const detail = isObject(body) && typeof body.message === 'string' ? `: ${body.message}` : '';
    return new ChatError('server_error', `POST ${url}: the stream ended in an error${detail}`, { cause: error, ...codeAndType(body) });
  }
  // The SDK reads a JSON content type with `response.json()`, which throws this for a body that is not JSON.
  if (isError(error) && error.name === 'SyntaxError') return new ChatError('bad_response', `POST ${url}: the body is not JSON (${error.message})`, { cause: error });
  // Anything else was thrown while sending or reading (a reset connection, an unexpected abort).
  return new ChatError('network', `POST ${url}: ${describeNetworkError(error)}`, { cause: error });
}

function statusError(url: string, error: APIError, status: number): ChatError {
  const detail = `POST ${url}: HTTP ${status}${serverMessage(error, status)}`;
  const retryAfterMs = error.headers ? retryAfter(error.headers) : undefined;
  const extra = { status, cause: error, ...(retryAfterMs === undefined ? {} : { retryAfterMs }), ...codeAndType(error.error) };
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

/** An error body's `code` and `type`, where it has them. */
function codeAndType(body: unknown): { code?: string; type?: string } {
  const code = isObject(body) ? textOf(body.code) : undefined;
  const type = isObject(body) ? textOf(body.type) : undefined;
  return { ...(code === undefined ? {} : { code }), ...(type === undefined ? {} : { type }) };
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

/** A tool call as its pieces add up in a stream. */
interface StreamedCall {
  id?: string;
  name?: string;
  arguments: string;
}

/**
 * Reads a streamed reply: each piece of content goes to `onDelta` as its chunk arrives, and the chunks add
 * up to the body a non-streaming call gets (tool calls by `index`: id and name from their first piece, the
 * arguments joined), which `readReply` then reads, so both give the same reply. `failure` maps what the
 * SDK throws while reading; a chunk that cannot be read, or a stream that ends before its finish reason,
 * is a `bad_response`.
 */
async function readStream(
  url: string,
  chunks: AsyncIterable<unknown>,
  requestedModel: string,
  stream: ChatStream,
  attempt: AbortSignal,
  failure: (error: unknown) => unknown,
): Promise<ChatReply> {
  const bad = (why: string) => new ChatError('bad_response', `POST ${url}: ${why}`);
  let model: string | undefined;
  let usage: unknown = null;
  let content = '';
  const calls = new Map<number, StreamedCall>();
  let finish: string | null = null;
  let received = 0;

  /** One chunk into the totals above; returns its content. */
  const add = (chunk: unknown): string => {
    const at = `chunk ${received} of the stream`;
    if (!isObject(chunk)) throw bad(`${at} is not a JSON object`);
    if (typeof chunk.model === 'string' && chunk.model) model = chunk.model;
    // With `include_usage` every chunk has `usage: null` but the last, which has the usage and no choice.
    if (isObject(chunk.usage)) usage = chunk.usage;
    const choices = chunk.choices ?? [];
    if (!Array.isArray(choices)) throw bad(`${at}: choices is not an array`);
    let text = '';
    for (const choice of choices as unknown[]) {
      if (!isObject(choice)) throw bad(`${at}: a choice is not an object`);
      // One choice is asked for: its `index` is 0, when it is given at all.
      if ((choice.index ?? 0) !== 0) continue;
      const delta = choice.delta ?? {};
      if (!isObject(delta)) throw bad(`${at}: delta is not an object`);
      if (delta.content !== undefined && delta.content !== null) {
        if (typeof delta.content !== 'string') throw bad(`${at}: delta.content is not a string`);
        text += delta.content;
      }
      if (delta.tool_calls !== undefined && delta.tool_calls !== null) {
        if (!Array.isArray(delta.tool_calls)) throw bad(`${at}: delta.tool_calls is not an array`);
        for (const piece of delta.tool_calls as unknown[]) {
          const fn = isObject(piece) ? (piece.function ?? {}) : undefined;
          if (!isObject(piece) || !Number.isInteger(piece.index) || !isObject(fn)) throw bad(`${at}: a tool call piece has no index or function`);
          const { id } = piece;
          const { name, arguments: args } = fn;
          if (![id, name, args].every((v) => v === undefined || v === null || typeof v === 'string')) {
            throw bad(`${at}: a tool call piece's id, name or arguments is not a string`);
          }
          const call = calls.get(piece.index as number) ?? { arguments: '' };
          call.id ??= typeof id === 'string' && id ? id : undefined;
          call.name ??= typeof name === 'string' && name ? name : undefined;
          call.arguments += typeof args === 'string' ? args : '';
          calls.set(piece.index as number, call);
        }
      }
      if (choice.finish_reason !== undefined && choice.finish_reason !== null) {
        if (typeof choice.finish_reason !== 'string') throw bad(`${at}: finish_reason is not a string`);
        finish = choice.finish_reason;
      }
    }
    return text;
  };

  const iterator = chunks[Symbol.asyncIterator]();
  try {
    for (;;) {
      let next: IteratorResult<unknown>;
      try {
        next = await iterator.next();
      } catch (error) {
        // The SDK parses each event's data as JSON.
        if (isError(error) && error.name === 'SyntaxError') throw bad(`chunk ${received} of the stream is not JSON (${error.message})`);
        throw failure(error);
      }
      if (next.done) break;
      const text = add(next.value);
      received++;
      content += text;
      if (text) stream.onDelta(text);
    }
  } finally {
    // Left early (a bad chunk, `onDelta` threw): closing the SDK's stream aborts its request.
    await iterator.return?.();
  }
  // The SDK ends a stream quietly when its request is aborted: by the timeout or the caller.
  if (attempt.aborted) throw failure(attempt.reason);
  if (received === 0) throw bad('the stream ended without a chunk');
  if (finish === null) throw bad('the stream ended before the finish reason');
  const toolCalls = [...calls.entries()].sort(([a], [b]) => a - b).map(([, call]) => ({ id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } }));
  return readReply(url, { model, choices: [{ message: { role: 'assistant', content: content || null, tool_calls: toolCalls }, finish_reason: finish }], usage }, requestedModel);
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
