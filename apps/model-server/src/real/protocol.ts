/**
 * The OpenAI chat-completions protocol as the real-model server speaks it, as pure functions: a request
 * body checked and read into a `CompletionRequest`, the conversation turned into the model's chat history,
 * and the reply bodies written back. Its server-sent-event frames are the ones the scripted server writes
 * too (`streamFrames` in ../http.ts, passed on from here).
 *
 * The model writes text only. A request may offer `tools` (the agent's `llm` policy always does): they
 * are accepted and not used, and the reply is plain text, which the policy takes as the run's answer.
 * A request that demands a tool call (`tool_choice` `required` or a named function) is refused with 400
 * rather than answered with something it did not ask for.
 */
import { messageText, type ReplyMeta, type Usage } from '../http';
import type { ChatHistoryItem, StopReason } from './llama-api';

export { streamFrames } from '../http';
export type { ReplyMeta, Usage };

export type Role = 'system' | 'user' | 'assistant';

/** One turn of the conversation after normalising roles (`developer` is a system turn, a tool result a user turn). */
export interface Turn {
  role: Role;
  text: string;
}

export interface CompletionRequest {
  model: string;
  turns: Turn[];
  maxTokens: number;
  temperature: number;
  topP?: number;
  seed?: number;
  stop: string[];
  stream: boolean;
  /** `stream_options.include_usage`: a last chunk carries the usage. */
  includeUsage: boolean;
}

export interface RequestLimits {
  /** The one model name this server answers to. */
  model: string;
  /** `max_tokens` when the request gives none. */
  defaultMaxTokens: number;
  /** The largest `max_tokens` accepted (the context size). */
  maxTokensCap: number;
}

/** Why a request is refused, as OpenAI words it: which parameter, and a code where one applies. */
export interface RequestProblem {
  message: string;
  param: string | null;
  code: string | null;
}

export type FinishReason = 'stop' | 'length';

const MAX_STOP_SEQUENCES = 4;

// ---------------------------------------------------------------------------------------------
// Request
// ---------------------------------------------------------------------------------------------

/** Reads a parsed JSON body; a `RequestProblem` is the reason for a 400. */
export function parseCompletionRequest(raw: unknown, limits: RequestLimits): CompletionRequest | RequestProblem {
  if (!isObject(raw)) return problem('the request body must be a JSON object', null);
  if (typeof raw.model !== 'string' || raw.model === '') return problem("'model' must be a non-empty string", 'model');
  if (raw.model !== limits.model) {
    return problem(`the model '${raw.model}' does not exist; this server answers to '${limits.model}'`, 'model', 'model_not_found');
  }

  const turns = readMessages(raw.messages);
  if (!Array.isArray(turns)) return turns;

  const maxTokens = readMaxTokens(raw, limits);
  if (typeof maxTokens !== 'number') return maxTokens;

  const temperature = optionalNumber(raw.temperature, 'temperature', 0, 2);
  if (isProblem(temperature)) return temperature;
  const topP = optionalNumber(raw.top_p, 'top_p', 0, 1);
  if (isProblem(topP)) return topP;
  const seed = optionalNumber(raw.seed, 'seed', 0, 2 ** 32 - 1);
  if (isProblem(seed)) return seed;
  if (seed !== undefined && !Number.isInteger(seed)) return problem("'seed' must be an integer", 'seed');

  const stop = readStop(raw.stop);
  if (!Array.isArray(stop)) return stop;

  if (raw.n !== undefined && raw.n !== null && raw.n !== 1) return problem("this server makes one choice per request: 'n' must be 1", 'n');
  const toolProblem = readTools(raw.tools, raw.tool_choice);
  if (toolProblem) return toolProblem;
  if (raw.response_format !== undefined && raw.response_format !== null) {
    const format = isObject(raw.response_format) ? raw.response_format.type : undefined;
    if (format !== 'text') return problem("this server writes plain text only: 'response_format' must be { type: 'text' }", 'response_format');
  }

  if (raw.stream !== undefined && raw.stream !== null && typeof raw.stream !== 'boolean') return problem("'stream' must be a boolean", 'stream');
  let includeUsage = false;
  if (raw.stream_options !== undefined && raw.stream_options !== null) {
    if (raw.stream !== true) return problem("'stream_options' is only allowed with 'stream: true'", 'stream_options');
    if (!isObject(raw.stream_options)) return problem("'stream_options' must be an object", 'stream_options');
    const include = raw.stream_options.include_usage;
    if (include !== undefined && typeof include !== 'boolean') return problem("'stream_options.include_usage' must be a boolean", 'stream_options.include_usage');
    includeUsage = include === true;
  }

  return {
    model: raw.model,
    turns,
    maxTokens,
    // Greedy by default: the same request gets the same answer, which tests and evals rely on.
    temperature: temperature ?? 0,
    ...(topP !== undefined ? { topP } : {}),
    ...(seed !== undefined ? { seed } : {}),
    stop,
    stream: raw.stream === true,
    includeUsage,
  };
}

function readMessages(messages: unknown): Turn[] | RequestProblem {
  if (!Array.isArray(messages) || messages.length === 0) return problem("'messages' must be a non-empty array", 'messages');
  const turns: Turn[] = [];
  for (const [i, m] of (messages as unknown[]).entries()) {
    const at = `messages[${i}]`;
    if (!isObject(m)) return problem(`${at} must be an object`, at);
    const text = messageText(m.content, 'refuse');
    if (text === undefined) return problem(`${at}.content must be a string, null or an array of text parts`, `${at}.content`);
    switch (m.role) {
      case 'system':
      case 'developer':
        turns.push({ role: 'system', text });
        break;
      case 'user':
        turns.push({ role: 'user', text });
        break;
      case 'assistant': {
        const calls = toolCallsText(m.tool_calls);
        if (calls === undefined) return problem(`${at}.tool_calls must be an array of { function: { name, arguments } }`, `${at}.tool_calls`);
        turns.push({ role: 'assistant', text: [text, calls].filter(Boolean).join('\n') });
        break;
      }
      case 'tool': {
        if (typeof m.tool_call_id !== 'string' || m.tool_call_id === '') return problem(`${at}.tool_call_id must be a non-empty string`, `${at}.tool_call_id`);
        // The model has no tool-result role of its own: the result reaches it as a user turn that says what it is.
        turns.push({ role: 'user', text: `Result of tool call ${m.tool_call_id}:\n${text}` });
        break;
      }
      default:
        return problem(`${at}.role must be one of system, developer, user, assistant, tool`, `${at}.role`);
    }
  }
  return turns;
}

function readMaxTokens(raw: Record<string, unknown>, limits: RequestLimits): number | RequestProblem {
  // `max_completion_tokens` is the newer name for the same limit; a request gives one or the other.
  const given = [raw.max_tokens, raw.max_completion_tokens].filter((v) => v !== undefined && v !== null);
  if (given.length === 0) return limits.defaultMaxTokens;
  const param = raw.max_tokens !== undefined && raw.max_tokens !== null ? 'max_tokens' : 'max_completion_tokens';
  if (given.length > 1 && given[0] !== given[1]) return problem("'max_tokens' and 'max_completion_tokens' disagree; give one", param);
  const value = given[0];
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) return problem(`'${param}' must be a positive integer`, param);
  if (value > limits.maxTokensCap) return problem(`'${param}' is ${value}; the model's context holds ${limits.maxTokensCap} tokens`, param);
  return value;
}

function readStop(stop: unknown): string[] | RequestProblem {
  if (stop === undefined || stop === null) return [];
  const list = typeof stop === 'string' ? [stop] : stop;
  if (!Array.isArray(list) || list.length > MAX_STOP_SEQUENCES || !list.every((s) => typeof s === 'string' && s !== '')) {
    return problem(`'stop' must be a non-empty string or an array of at most ${MAX_STOP_SEQUENCES} of them`, 'stop');
  }
  return list as string[];
}

function readTools(tools: unknown, toolChoice: unknown): RequestProblem | undefined {
  if (tools !== undefined && tools !== null && !Array.isArray(tools)) return problem("'tools' must be an array", 'tools');
  if (toolChoice === undefined || toolChoice === null || toolChoice === 'auto' || toolChoice === 'none') return undefined;
  return problem("this server answers in text and calls no tools: 'tool_choice' may be 'auto' or 'none' only", 'tool_choice');
}

function optionalNumber(value: unknown, param: string, min: number, max: number): number | undefined | RequestProblem {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > max) {
    return problem(`'${param}' must be a number from ${min} to ${max}`, param);
  }
  return value;
}

/** An earlier assistant turn's tool calls, written as text the model can read back (or undefined if malformed). */
function toolCallsText(calls: unknown): string | undefined {
  if (calls === undefined || calls === null) return '';
  if (!Array.isArray(calls)) return undefined;
  const lines: string[] = [];
  for (const call of calls as unknown[]) {
    const fn = isObject(call) ? call.function : undefined;
    if (!isObject(fn) || typeof fn.name !== 'string') return undefined;
    const args = typeof fn.arguments === 'string' ? fn.arguments : JSON.stringify(fn.arguments ?? {});
    lines.push(`Called ${fn.name}${isObject(call) && typeof call.id === 'string' ? ` (call ${call.id})` : ''} with ${args}`);
  }
  return lines.join('\n');
}

export function isProblem(value: unknown): value is RequestProblem {
  return isObject(value) && typeof value.message === 'string' && 'param' in value && 'code' in value;
}

function problem(message: string, param: string | null, code: string | null = null): RequestProblem {
  return { message, param, code };
}

// ---------------------------------------------------------------------------------------------
// The conversation as the model's chat history
// ---------------------------------------------------------------------------------------------

/**
 * The turns as node-llama-cpp's chat history, ending in the model's turn to write: an empty one after a
 * user or system turn, or the last assistant turn itself, which the model then continues (a prefill).
 */
export function chatHistoryOf(turns: Turn[]): ChatHistoryItem[] {
  const history: ChatHistoryItem[] = turns.map((t) => (t.role === 'assistant' ? { type: 'model', response: [t.text] } : { type: t.role, text: t.text }));
  const last = turns[turns.length - 1];
  if (last?.role !== 'assistant') history.push({ type: 'model', response: [] });
  return history;
}

/** A stop on the model's end-of-turn or a `stop` sequence is `stop`; running into `max_tokens` is `length`. */
export function finishReasonOf(stopReason: StopReason): FinishReason {
  switch (stopReason) {
    case 'maxTokens':
      return 'length';
    case 'eogToken':
    case 'stopGenerationTrigger':
    case 'customStopTrigger':
    case 'functionCalls':
    case 'abort':
      return 'stop';
    default: {
      const unknown: never = stopReason;
      throw new Error(`unknown stop reason '${String(unknown)}'`);
    }
  }
}

export function usageOf(promptTokens: number, completionTokens: number): Usage {
  return { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
}

// ---------------------------------------------------------------------------------------------
// Replies
// ---------------------------------------------------------------------------------------------

export function completionBody(meta: ReplyMeta, text: string, finish: FinishReason, usage: Usage): Record<string, unknown> {
  return {
    id: meta.id,
    object: 'chat.completion',
    created: meta.created,
    model: meta.model,
    choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: finish, logprobs: null }],
    usage,
  };
}

/** The text of a stream: the `delta.content` of every chunk, in order, up to `[DONE]`. The inverse of `streamFrames` for a reply in text. */
export function textOfStream(body: string): { text: string; finish: string | null; usage: Usage | null; done: boolean } {
  let text = '';
  let finish: string | null = null;
  let usage: Usage | null = null;
  let done = false;
  for (const event of body.split('\n\n')) {
    if (!event.startsWith('data: ')) continue;
    const data = event.slice('data: '.length);
    if (data === '[DONE]') {
      done = true;
      break;
    }
    const chunk = JSON.parse(data) as { choices?: { delta?: { content?: string }; finish_reason?: string | null }[]; usage?: Usage | null };
    for (const choice of chunk.choices ?? []) {
      text += choice.delta?.content ?? '';
      if (choice.finish_reason) finish = choice.finish_reason;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  return { text, finish, usage, done };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
