/**
 * A small deterministic model server speaking the OpenAI chat-completions protocol, for offline runs and
 * tests. Every reply is a pure function of the request (no randomness, no clock); the only state is a
 * per-conversation attempt counter used by the scenarios that fail a fixed number of times first.
 *
 * Routes: `POST /v1/chat/completions` (and `/chat/completions`), `GET /v1/models` (and `/models`),
 * `GET /healthz`.
 *
 * `stream: true` (with `stream_options.include_usage`) answers a completion as OpenAI streams it
 * (`text/event-stream`): a chunk with the assistant role, the content word by word (each word with the
 * whitespace after it, so the pieces join back to the non-streaming `content` exactly), each tool call as
 * `delta.tool_calls` pieces (`id`, `type` and name first, then its `arguments` word by word), a chunk with
 * the finish reason, the usage chunk when asked for (the usage the non-streaming reply reports), then
 * `data: [DONE]`. An error is a JSON reply with its status whether or not a stream was asked for, as OpenAI
 * answers. `[pace:MS]` in the last user message waits MS ms (at most 120000) between the chunks of a stream,
 * so a client sees its first token before the whole reply; it changes nothing without `stream: true`.
 *
 * The scenario comes from a `[scenario:NAME]` directive in the text of the LAST user message, else from the
 * model name (`scripted` = `agent`, `scripted-NAME`, e.g. `scripted-429`), see `SCENARIOS` and `ALIASES`.
 *
 * - `agent`: with fewer than 2 tool results in the conversation, calls tools chosen from those offered
 *   (`search` with `{"query": <words of the last user message>}`, then `embed` with `{"text": ...}`; if
 *   neither is offered, the first tool offered) with `finish_reason: 'tool_calls'`; with 2 tool results (or
 *   no tools offered), answers in text quoting the first 40 characters of each tool output, `'stop'`.
 * - `malformed_args`: while the conversation has no tool result, one tool call whose `arguments` is not
 *   valid JSON; once a tool result (e.g. the caller's error report) is in, it behaves as `agent`.
 * - `rate_limited` / `server_error`: 429 (`Retry-After: 1`) / 500 for the first 2 requests carrying the same
 *   conversation (fingerprint = SHA-256 of the messages), then the `agent` reply.
 * - `always_500`: 500 every time. `bad_request`: 400 with an OpenAI-style error body.
 * - The key's failures, every time, as providers send them: `unauthorized` 401 (`invalid_api_key`), `forbidden`
 *   403, `quota_exhausted` 429 with `insufficient_quota` (a spent budget, not a rate limit), `payment_required` 402.
 * - `length`: a truncated answer (`max_tokens` words, default 8) with `finish_reason: 'length'`.
 * - `slow`: the `agent` reply after `[delay:MS]` ms (default 2000, at most 120000); streamed, the delay
 *   comes before the first byte and `[pace:MS]` between the chunks after it.
 *
 * Eval rules (eval-rules.ts) decide the reply wherever a scenario would give the `agent` reply, so they compose
 * with the failures: `rate_limited` fails twice, then answers by them. First match wins:
 * - a LAST user message starting `[grading]` (the `model_graded` scorer's judge prompt) is judged: `GRADE: C`
 *   when the submission contains a target line, else `GRADE: I` (normalised: lowercase, whitespace collapsed);
 *   its directives are read from its <question> only; a malformed one is a 400;
 * - `[answer: X]` in the last user message is answered with exactly X (`finish_reason: 'stop'`);
 * - the input of a case of a shipped `generate` suite (qa, mcq) is answered with its first target when the
 *   case is in the seeded subset (`seededRight`), else with a wrong answer (`wrongAnswer`);
 * - the goal of a shipped `agent` case gets one tool call (the goal's own tool when seeded right, else `fetch`
 *   on its path), then `done: <first 40 characters of the result>`.
 * `length`, `always_500`, `bad_request` and the key's failures ignore them.
 *
 * Unknown model, unknown scenario or malformed body -> 400 `{ error: { message, type: 'invalid_request_error' } }`;
 * a body over 1 MiB -> 413. The shipped suites are read at start: without them the server does not start.
 */
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import { errorBody, listen, MAX_BODY_BYTES, messageText, methodNotAllowed, readBody, routePath, sendJson, streamFrames, type ReplyMeta, type Usage } from './http';
import { agentAnswer, agentCall, answerDirective, generateAnswer, judge, readGrading, shippedCase, shippedCases, type Grading } from './eval-rules';
import { callDirectives, DirectiveError, withoutCallDirectives, type CallDirective } from './call-directives';

export const SCENARIOS = [
  'agent',
  'malformed_args',
  'rate_limited',
  'server_error',
  'always_500',
  'bad_request',
  'unauthorized',
  'forbidden',
  'quota_exhausted',
  'payment_required',
  'length',
  'slow',
] as const;
export type Scenario = (typeof SCENARIOS)[number];

/** Short names accepted wherever a scenario name is (`scripted-429`, `[scenario:500]`). */
export const ALIASES: Readonly<Record<string, Scenario>> = {
  '429': 'rate_limited',
  '500': 'server_error',
  '400': 'bad_request',
  '401': 'unauthorized',
  '403': 'forbidden',
  '402': 'payment_required',
  quota: 'quota_exhausted',
};

export const MODEL_PREFIX = 'scripted';
/** Tool results after which the `agent` scenario answers in text. */
export const AGENT_TOOL_RESULTS = 2;
/** Failed attempts per conversation before `rate_limited` / `server_error` succeed. */
export const FAILURES_BEFORE_SUCCESS = 2;
export const DEFAULT_DELAY_MS = 2000;
const MAX_DELAY_MS = 120_000;
const QUOTE_CHARS = 40;
const MAX_TRACKED_CONVERSATIONS = 10_000;

export interface ModelServerOptions {
  /** 0 (the default) picks a free port. */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
}

export interface ModelServer {
  /** The base URL for a client, e.g. `http://127.0.0.1:8090/v1`. */
  readonly url: string;
  readonly port: number;
  /** Chat-completion requests received so far (including those answered with an error). */
  readonly requests: number;
  /** Stops listening, drops open connections and pending delayed or paced replies. Idempotent. */
  close(): Promise<void>;
}

export async function startModelServer(options: ModelServerOptions = {}): Promise<ModelServer> {
  const host = options.host ?? '127.0.0.1';
  shippedCases(); // a missing or broken shipped suite fails the start, not a request
  const attempts = new Map<string, number>();
  const pending = new Set<NodeJS.Timeout>();
  let requests = 0;

  const server = createServer((req, res) => {
    res.sendDate = false; // no clock in the replies, headers included
    const path = routePath(req);
    if (path === '/v1/chat/completions' || path === '/chat/completions') {
      if (req.method !== 'POST') return methodNotAllowed(req, res, 'POST');
      requests++;
      void readBody(req).then((body) => {
        if (body === null) {
          return sendJson(res, 413, errorBody(`the request body is larger than ${MAX_BODY_BYTES} bytes`, 'invalid_request_error', null, 'request_too_large'));
        }
        const reply = respond(body, attempts);
        // A reply waits on one timer at a time (the `slow` delay, then each pause of a paced stream), which
        // goes when the client does or the server closes.
        let timer: NodeJS.Timeout | undefined;
        const after = (ms: number, then: () => void): void => {
          if (ms <= 0) return then();
          const current = setTimeout(() => {
            pending.delete(current);
            then();
          }, ms);
          pending.add(current);
          timer = current;
        };
        res.on('close', () => {
          if (timer === undefined) return;
          clearTimeout(timer);
          pending.delete(timer);
        });
        after(reply.delayMs ?? 0, () => {
          if ('body' in reply) return sendJson(res, reply.status, reply.body, reply.headers);
          const { events, paceMs } = reply;
          res.writeHead(reply.status, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
          if (paceMs <= 0) return void res.end(events.join(''));
          const write = (i: number): void => {
            if (i === events.length - 1) return void res.end(events[i]);
            res.write(events[i]);
            after(paceMs, () => write(i + 1));
          };
          write(0);
        });
      }, () => res.destroy());
      return;
    }
    if (path === '/v1/models' || path === '/models') {
      if (req.method !== 'GET') return methodNotAllowed(req, res, 'GET');
      return sendJson(res, 200, { object: 'list', data: modelNames().map((id) => ({ id, object: 'model', created: 0, owned_by: 'agentrun' })) });
    }
    if (path === '/healthz') {
      if (req.method !== 'GET') return methodNotAllowed(req, res, 'GET');
      return sendJson(res, 200, { status: 'ok' });
    }
    req.resume();
    sendJson(res, 404, errorBody(`no route for ${req.method ?? 'GET'} ${path}`, 'invalid_request_error', null, 'not_found'));
  });

  const { port, url } = await listen(server, options.port ?? 0, host);
  let closing: Promise<void> | undefined;

  return {
    url,
    port,
    get requests() {
      return requests;
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        for (const timer of pending) clearTimeout(timer);
        pending.clear();
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
  };
}

/** Every model name the server answers to. */
export function modelNames(): string[] {
  return [MODEL_PREFIX, ...[...SCENARIOS, ...Object.keys(ALIASES)].map((name) => `${MODEL_PREFIX}-${name}`)];
}

// ---------------------------------------------------------------------------------------------
// Replies (the HTTP plumbing is in http.ts, shared with the real-model server)
// ---------------------------------------------------------------------------------------------

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

type Reply = { status: number; headers?: Record<string, string>; delayMs?: number } & (
  | { body: Json }
  /** A completion asked for with `stream: true`: its server-sent events, written `paceMs` apart. */
  | { events: string[]; paceMs: number }
);

const invalid = (message: string): Reply => ({ status: 400, body: errorBody(message, 'invalid_request_error') });

// ---------------------------------------------------------------------------------------------
// The protocol: request -> reply
// ---------------------------------------------------------------------------------------------

interface WireToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

interface Message {
  role: 'system' | 'developer' | 'user' | 'assistant' | 'tool';
  text: string;
  tool_calls: WireToolCall[];
  tool_call_id?: string;
  name?: string;
}

interface OfferedTool {
  name: string;
  parameters?: Record<string, unknown>;
}

interface Request {
  model: string;
  messages: Message[];
  tools: OfferedTool[];
  max_tokens?: number;
  stream: boolean;
  /** `stream_options.include_usage`: a last chunk carries the usage. */
  includeUsage: boolean;
}

const ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool']);

function respond(text: string, attempts: Map<string, number>): Reply {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return invalid('the request body is not valid JSON');
  }
  const parsed = readRequest(raw);
  if (typeof parsed === 'string') return invalid(parsed);
  const request = parsed;

  const lastUser = lastUserText(request);
  const grading = readGrading(lastUser);
  if (typeof grading === 'string') return invalid(grading);
  // A malformed `[call: ...]` is the caller's mistake, said once here (a judge plays none of them).
  if (!grading) {
    try {
      scriptCalls(request);
    } catch (err) {
      if (err instanceof DirectiveError) return invalid(err.message);
      throw err;
    }
  }
  // A judge's directives are the graded case's: a submission or a rubric cannot switch the scenario.
  const directives = grading ? grading.question : lastUser;
  const directive = /\[scenario:([^\]\s]+)\]/i.exec(directives)?.[1];
  let scenario: Scenario | undefined;
  if (directive !== undefined) {
    scenario = scenarioNamed(directive.toLowerCase());
    if (!scenario) return invalid(`unknown scenario '${directive}'; known: ${[...SCENARIOS, ...Object.keys(ALIASES)].join(', ')}`);
    if (!isOurModel(request.model)) return unknownModel(request.model);
  } else {
    scenario = scenarioOfModel(request.model);
    if (!scenario) return unknownModel(request.model);
  }

  const fingerprint = sha256(canonical((raw as { messages: unknown }).messages));
  const replyId = `chatcmpl-${sha256(canonical(raw)).slice(0, 24)}`;
  const pace = /\[pace:(\d+)\]/i.exec(directives)?.[1];
  const paceMs = Math.min(Number(pace ?? 0), MAX_DELAY_MS);
  const complete = (turn: Turn) => completion(request, replyId, turn, paceMs);

  switch (scenario) {
    case 'rate_limited':
    case 'server_error': {
      const key = `${scenario}|${fingerprint}`;
      const attempt = (attempts.get(key) ?? 0) + 1;
      attempts.delete(key); // re-insert: the map's order is least recently used first
      attempts.set(key, attempt);
      if (attempts.size > MAX_TRACKED_CONVERSATIONS) attempts.delete(attempts.keys().next().value as string);
      if (attempt <= FAILURES_BEFORE_SUCCESS) {
        return scenario === 'rate_limited'
          ? {
              status: 429,
              headers: { 'retry-after': '1' },
              body: errorBody(`rate limit reached (attempt ${attempt} of this conversation); retry after 1 s`, 'rate_limit_error', null, 'rate_limit_exceeded'),
            }
          : { status: 500, body: errorBody(`scripted server error (attempt ${attempt} of this conversation)`, 'server_error') };
      }
      return complete(scriptedTurn(request, fingerprint, grading));
    }
    case 'always_500':
      return { status: 500, body: errorBody('scripted server error (always)', 'server_error') };
    case 'bad_request':
      return { status: 400, body: errorBody('scripted bad request: this request is refused', 'invalid_request_error', null, 'scripted_bad_request') };
    case 'unauthorized':
      return { status: 401, body: errorBody('Incorrect API key provided (scripted)', 'invalid_request_error', null, 'invalid_api_key') };
    case 'forbidden':
      return { status: 403, body: errorBody('this key may not use this model (scripted)', 'permission_error', null, 'model_not_allowed') };
    case 'quota_exhausted':
      return { status: 429, body: errorBody('You exceeded your current quota, please check your plan and billing details (scripted)', 'insufficient_quota', null, 'insufficient_quota') };
    case 'payment_required':
      return { status: 402, body: errorBody('the budget of this key is spent (scripted)', 'billing_error', null, 'budget_exceeded') };
    case 'malformed_args':
      if (toolResults(request) === 0) return complete(malformedTurn(request, fingerprint));
      return complete(scriptedTurn(request, fingerprint, grading));
    case 'length':
      return complete(lengthTurn(request));
    case 'slow': {
      const delay = /\[delay:(\d+)\]/i.exec(directives)?.[1];
      const delayMs = Math.min(delay === undefined ? DEFAULT_DELAY_MS : Number(delay), MAX_DELAY_MS);
      return { ...complete(scriptedTurn(request, fingerprint, grading)), delayMs };
    }
    case 'agent':
      return complete(scriptedTurn(request, fingerprint, grading));
  }
}

function unknownModel(model: string): Reply {
  return invalid(`the model '${model}' does not exist; this server answers to ${modelNames().join(', ')}`);
}

function scenarioNamed(name: string): Scenario | undefined {
  return (SCENARIOS as readonly string[]).includes(name) ? (name as Scenario) : ALIASES[name];
}

function isOurModel(model: string): boolean {
  return scenarioOfModel(model) !== undefined;
}

function scenarioOfModel(model: string): Scenario | undefined {
  if (model === MODEL_PREFIX) return 'agent';
  if (!model.startsWith(`${MODEL_PREFIX}-`)) return undefined;
  return scenarioNamed(model.slice(MODEL_PREFIX.length + 1));
}

/** Validates the parts of the body the server uses; a string is the reason for a 400. */
function readRequest(raw: unknown): Request | string {
  if (!isObject(raw)) return 'the request body must be a JSON object';
  if (typeof raw.model !== 'string' || raw.model === '') return "'model' must be a non-empty string";
  if (!Array.isArray(raw.messages) || raw.messages.length === 0) return "'messages' must be a non-empty array";
  const messages: Message[] = [];
  for (const [i, m] of (raw.messages as unknown[]).entries()) {
    if (!isObject(m) || typeof m.role !== 'string' || !ROLES.has(m.role)) {
      return `messages[${i}].role must be one of ${[...ROLES].join(', ')}`;
    }
    const text = messageText(m.content, 'skip');
    if (text === undefined) return `messages[${i}].content must be a string, null or an array of text parts`;
    const message: Message = { role: m.role as Message['role'], text, tool_calls: [] };
    if (m.role === 'tool') {
      if (typeof m.tool_call_id !== 'string' || m.tool_call_id === '') return `messages[${i}].tool_call_id must be a non-empty string`;
      message.tool_call_id = m.tool_call_id;
    }
    if (typeof m.name === 'string') message.name = m.name;
    if (m.tool_calls !== undefined && m.tool_calls !== null) {
      if (m.role !== 'assistant' || !Array.isArray(m.tool_calls)) return `messages[${i}].tool_calls must be an array on an assistant message`;
      for (const [j, c] of (m.tool_calls as unknown[]).entries()) {
        const fn = isObject(c) ? c.function : undefined;
        if (!isObject(c) || typeof c.id !== 'string' || !isObject(fn) || typeof fn.name !== 'string' || typeof fn.arguments !== 'string') {
          return `messages[${i}].tool_calls[${j}] must be { id, type: 'function', function: { name, arguments: string } }`;
        }
        message.tool_calls.push({ id: c.id, type: 'function', function: { name: fn.name, arguments: fn.arguments } });
      }
    }
    messages.push(message);
  }
  const tools: OfferedTool[] = [];
  if (raw.tools !== undefined && raw.tools !== null) {
    if (!Array.isArray(raw.tools)) return "'tools' must be an array";
    for (const [i, t] of (raw.tools as unknown[]).entries()) {
      const fn = isObject(t) ? t.function : undefined;
      if (!isObject(t) || t.type !== 'function' || !isObject(fn) || typeof fn.name !== 'string' || fn.name === '') {
        return `tools[${i}] must be { type: 'function', function: { name, parameters? } }`;
      }
      tools.push({ name: fn.name, ...(isObject(fn.parameters) ? { parameters: fn.parameters } : {}) });
    }
  }
  if (raw.stream !== undefined && raw.stream !== null && typeof raw.stream !== 'boolean') return "'stream' must be a boolean";
  let includeUsage = false;
  if (raw.stream_options !== undefined && raw.stream_options !== null) {
    if (raw.stream !== true) return "'stream_options' is only allowed with 'stream: true'";
    if (!isObject(raw.stream_options)) return "'stream_options' must be an object";
    const include = raw.stream_options.include_usage;
    if (include !== undefined && typeof include !== 'boolean') return "'stream_options.include_usage' must be a boolean";
    includeUsage = include === true;
  }
  const request: Request = { model: raw.model, messages, tools, stream: raw.stream === true, includeUsage };
  if (raw.max_tokens !== undefined && raw.max_tokens !== null) {
    if (typeof raw.max_tokens !== 'number' || !Number.isInteger(raw.max_tokens) || raw.max_tokens < 1) {
      return "'max_tokens' must be a positive integer";
    }
    request.max_tokens = raw.max_tokens;
  }
  return request;
}

// ---------------------------------------------------------------------------------------------
// The scripted model
// ---------------------------------------------------------------------------------------------

interface Turn {
  content: string | null;
  tool_calls: WireToolCall[];
  finish_reason: 'stop' | 'tool_calls' | 'length';
}

function toolResults(request: Request): number {
  return request.messages.filter((m) => m.role === 'tool').length;
}

/** The text of the last user message ('' without one): where directives, eval cases and goals are read. */
function lastUserText(request: Request): string {
  return [...request.messages].reverse().find((m) => m.role === 'user')?.text ?? '';
}

/**
 * What the conversation's author wrote, where `[call: ...]` and `[answer: ...]` directives are played
 * from: the system and developer messages (a definition's instructions) and the user messages (the
 * goal, a case's input), in order.
 */
function scriptText(request: Request): string {
  return scriptMessages(request)
    .map((m) => m.text)
    .join('\n');
}

function scriptMessages(request: Request): Message[] {
  return request.messages.filter((m) => m.role === 'system' || m.role === 'developer' || m.role === 'user');
}

/** The conversation's `[call: ...]` directives in order; a malformed one names its message (counting from 1). */
function scriptCalls(request: Request): CallDirective[] {
  return request.messages.flatMap((m, i) => {
    if (m.role !== 'system' && m.role !== 'developer' && m.role !== 'user') return [];
    try {
      return callDirectives(m.text);
    } catch (err) {
      if (err instanceof DirectiveError) throw new DirectiveError(`message ${i + 1} (${m.role}): ${err.message}`);
      throw err;
    }
  });
}

/** The words of the last user message, directives removed (at most 12), or a stand-in when there are none. */
function goalWords(request: Request): string {
  const text = withoutCallDirectives(lastUserText(request)).replace(/\[[a-z_]+:[^\]]*\]/gi, ' ');
  const words = text.match(/[\p{L}\p{N}][\p{L}\p{N}'_-]*/gu) ?? [];
  return words.length ? words.slice(0, 12).join(' ') : 'the task';
}

/** The tools the scripted agent calls, in order: `search`, then `embed`, else the first tool offered. */
function plannedTools(request: Request): OfferedTool[] {
  const preferred = ['search', 'embed']
    .map((name) => request.tools.find((t) => t.name === name))
    .filter((t): t is OfferedTool => t !== undefined);
  return preferred.length ? preferred : request.tools.slice(0, 1);
}

function argumentsFor(tool: OfferedTool, words: string): Record<string, Json> {
  if (tool.name === 'search') return { query: words };
  if (tool.name === 'embed') return { text: words };
  // Any other tool: fill its first required (else first) parameter from the schema.
  const properties = isObject(tool.parameters?.properties) ? tool.parameters.properties : {};
  const required = Array.isArray(tool.parameters?.required) ? (tool.parameters.required as unknown[]) : [];
  const name = [...required, ...Object.keys(properties)].find((p): p is string => typeof p === 'string');
  if (name === undefined) return {};
  const schema = properties[name];
  const type = isObject(schema) ? schema.type : undefined;
  return { [name]: type === 'integer' || type === 'number' ? 1 : type === 'boolean' ? true : words };
}

const say = (content: string): Turn => ({ content, tool_calls: [], finish_reason: 'stop' });

/** The reply once any failure a scenario scripts is over: an eval rule's when one applies, else the `agent` scenario's. */
function scriptedTurn(request: Request, fingerprint: string, grading: Grading | undefined): Turn {
  return evalTurn(request, fingerprint, grading) ?? agentTurn(request, fingerprint);
}

/**
 * The eval rules, first match wins: a grading prompt is judged; `[answer: X]` is answered X; the input of
 * a shipped `generate` case is answered right or wrong as the case is seeded; the goal of a shipped
 * `agent` case gets its one tool call, then `done: <the result's start>`.
 */
function evalTurn(request: Request, fingerprint: string, grading: Grading | undefined): Turn | undefined {
  if (grading) return say(judge(grading));
  const scripted = directedTurn(request, fingerprint);
  if (scripted) return scripted;
  const text = lastUserText(request);
  const answer = answerDirective(text);
  if (answer !== undefined) return say(answer);
  const shipped = shippedCase(text);
  if (!shipped) return undefined;
  if (shipped.solver === 'generate') return say(generateAnswer(shipped));
  const results = request.messages.filter((m) => m.role === 'tool');
  if (results.length) return say(agentAnswer(results[results.length - 1].text));
  const call = agentCall(shipped);
  if (!request.tools.some((t) => t.name === call.tool)) return say(`I cannot do this: the '${call.tool}' tool is not offered.`);
  return { content: null, tool_calls: [{ id: callId(fingerprint, 0), type: 'function', function: { name: call.tool, arguments: JSON.stringify(call.args) } }], finish_reason: 'tool_calls' };
}

/**
 * The `[call: ...]` directives, played in order: with n tool results in the conversation, call n+1 (the
 * tool as named, offered or not, with the arguments as written: a test drives bad calls too); after the
 * last, the `[answer: X]` directive's X, else a summary of the results. Undefined without directives.
 */
function directedTurn(request: Request, fingerprint: string): Turn | undefined {
  const calls = scriptCalls(request);
  if (calls.length === 0) return undefined;
  const script = scriptText(request);
  const done = toolResults(request);
  if (done >= calls.length) return say(answerDirective(withoutCallDirectives(script)) ?? finalAnswer(request));
  const { tool, args } = calls[done];
  return { content: null, tool_calls: [{ id: callId(fingerprint, 0), type: 'function', function: { name: tool, arguments: JSON.stringify(args) } }], finish_reason: 'tool_calls' };
}

function agentTurn(request: Request, fingerprint: string): Turn {
  const done = toolResults(request);
  const planned = plannedTools(request);
  if (done >= AGENT_TOOL_RESULTS || planned.length === 0) return { content: finalAnswer(request), tool_calls: [], finish_reason: 'stop' };
  const words = goalWords(request);
  const count = Math.min(AGENT_TOOL_RESULTS - done, planned.length);
  const tool_calls = Array.from({ length: count }, (_, i): WireToolCall => {
    const tool = planned[(done + i) % planned.length];
    return { id: callId(fingerprint, i), type: 'function', function: { name: tool.name, arguments: JSON.stringify(argumentsFor(tool, words)) } };
  });
  return { content: null, tool_calls, finish_reason: 'tool_calls' };
}

function finalAnswer(request: Request): string {
  const names = new Map<string, string>();
  for (const m of request.messages) for (const c of m.tool_calls) names.set(c.id, c.function.name);
  const quotes = request.messages
    .filter((m) => m.role === 'tool')
    .map((m) => `${names.get(m.tool_call_id ?? '') ?? m.name ?? 'tool'}: "${[...m.text].slice(0, QUOTE_CHARS).join('')}"`);
  const goal = goalWords(request);
  return quotes.length
    ? `Done with "${goal}". Findings: ${quotes.join('; ')}.`
    : `Done with "${goal}". No tools were used.`;
}

function malformedTurn(request: Request, fingerprint: string): Turn {
  const name = plannedTools(request)[0]?.name ?? 'search';
  const broken = `{"query": ${JSON.stringify(goalWords(request))}`; // the closing brace is missing on purpose
  return { content: null, tool_calls: [{ id: callId(fingerprint, 0), type: 'function', function: { name, arguments: broken } }], finish_reason: 'tool_calls' };
}

function lengthTurn(request: Request): Turn {
  const full = `The answer to "${goalWords(request)}" is longer than this reply may be, so it stops here and the caller decides what to do next.`;
  return { content: full.split(/\s+/).slice(0, request.max_tokens ?? 8).join(' '), tool_calls: [], finish_reason: 'length' };
}

function callId(fingerprint: string, index: number): string {
  return `call_${fingerprint.slice(0, 16)}_${index}`;
}

function completion(request: Request, id: string, turn: Turn, paceMs: number): Reply {
  const prompt = request.messages.reduce((n, m) => n + words(m.text) + m.tool_calls.reduce((k, c) => k + callWords(c), 0), 0);
  const completionTokens = words(turn.content ?? '') + turn.tool_calls.reduce((k, c) => k + callWords(c), 0);
  const usage = { prompt_tokens: prompt, completion_tokens: completionTokens, total_tokens: prompt + completionTokens };
  if (request.stream) return { status: 200, events: streamedTurn({ id, created: 0, model: request.model }, turn, usage, request.includeUsage), paceMs };
  const message: Record<string, Json> = { role: 'assistant', content: turn.content };
  if (turn.tool_calls.length) message.tool_calls = turn.tool_calls as unknown as Json[];
  return {
    status: 200,
    body: {
      id,
      object: 'chat.completion',
      created: 0,
      model: request.model,
      choices: [{ index: 0, message, finish_reason: turn.finish_reason, logprobs: null }],
      usage,
    },
  };
}

/** The turn as the events of a stream (see the header): the same content, tool calls, finish reason and usage. */
function streamedTurn(meta: ReplyMeta, turn: Turn, usage: Usage, includeUsage: boolean): string[] {
  const frames = streamFrames(meta, includeUsage);
  return [
    frames.first(),
    ...pieces(turn.content ?? '').map(frames.text),
    ...turn.tool_calls.flatMap((call, index) => [
      frames.toolCall({ index, id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } }),
      ...pieces(call.function.arguments).map((args) => frames.toolCall({ index, function: { arguments: args } })),
    ]),
    frames.finish(turn.finish_reason),
    ...(includeUsage ? [frames.usage(usage)] : []),
    frames.done(),
  ];
}

/** A text in the pieces a stream sends: each word with the whitespace after it (leading whitespace alone), joining back to the text. */
function pieces(text: string): string[] {
  return text.match(/^\s+|\S+\s*/g) ?? [];
}

function words(text: string): number {
  return text.split(/\s+/).filter(Boolean).length;
}

function callWords(call: WireToolCall): number {
  return words(call.function.name) + words(call.function.arguments);
}

// ---------------------------------------------------------------------------------------------

/** JSON with object keys sorted, so a fingerprint does not depend on key order. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (isObject(value)) {
    return `{${Object.keys(value)
      .sort()
      .filter((k) => value[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
