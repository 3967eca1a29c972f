import { mkdtemp, rm } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  BadArguments,
  ChatError,
  classifyModelError,
  CPU_TOOLS,
  createChatClient,
  GPU_TOOLS,
  isRetryable,
  Workspace,
  type ChatClient,
  type ChatMessage,
  type ToolSpec,
} from '@agentrun/activities';
import { TOOL_NAMES, toolFunctionSpec } from '@agentrun/contracts';
import { choice, exact, includes, loadSuite, type Score, type SuiteCase } from '@agentrun/evals';
import { applyReply, applyToolResult, planLlm, startConversation } from '@agentrun/workflows';
import { answeredRight, DONT_KNOW, seededRight, wrongAnswer } from './eval-rules';
import { MAX_BODY_BYTES } from './http';
import { startModelServer, type ModelServer } from './model-server';

/** Real HTTP on 127.0.0.1 random ports throughout: the deterministic model server and the real client. */

const TOOLS: ToolSpec[] = [
  { type: 'function', function: { name: 'embed', parameters: { type: 'object', properties: { text: { type: 'string' } } } } },
  { type: 'function', function: { name: 'search', parameters: { type: 'object', properties: { query: { type: 'string' } } } } },
];

const goal = (text: string): ChatMessage[] => [
  { role: 'system', content: 'You are a careful agent.' },
  { role: 'user', content: text },
];

async function failure(promise: Promise<unknown>): Promise<ChatError> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof ChatError) return err;
    throw err;
  }
  throw new Error('expected a ChatError, got a reply');
}

describe('chat client against the deterministic model server', () => {
  let server: ModelServer;
  let chat: ChatClient;
  const client = (model: string, timeoutMs = 5000) => createChatClient({ baseUrl: server.url, model, timeoutMs });

  beforeEach(async () => {
    server = await startModelServer({ port: 0 });
    chat = client('scripted');
  });
  afterEach(() => server.close());

  it('agent: calls search then embed with parsed arguments, then answers quoting the tool outputs', async () => {
    const messages = goal('find the memory leak in the parser');
    const first = await chat.complete({ messages, tools: TOOLS });
    expect(first.finish_reason).toBe('tool_calls');
    expect(first.content).toBeNull();
    expect(first.model).toBe('scripted');
    expect(first.tool_calls).toEqual([
      expect.objectContaining({ name: 'search', arguments: { query: 'find the memory leak in the parser' }, malformed: false }),
      expect.objectContaining({ name: 'embed', arguments: { text: 'find the memory leak in the parser' }, malformed: false }),
    ]);
    expect(first.tool_calls[0].id).not.toBe(first.tool_calls[1].id);
    expect(first.message.tool_calls?.[0].function.arguments).toBe(first.tool_calls[0].raw_arguments);
    expect(first.usage).toEqual({ prompt_tokens: 12, completion_tokens: expect.any(Number), total_tokens: expect.any(Number) });
    expect(first.usage!.total_tokens).toBe(first.usage!.prompt_tokens + first.usage!.completion_tokens);

    const searchOut = 'src/parser.txt: the parser allocates a buffer per token and never frees it';
    const embedOut = 'embedded 6 terms into 64 dims (6 non-zero)';
    messages.push(
      first.message,
      { role: 'tool', tool_call_id: first.tool_calls[0].id, content: searchOut },
      { role: 'tool', tool_call_id: first.tool_calls[1].id, content: embedOut },
    );
    const second = await chat.complete({ messages, tools: TOOLS });
    expect(second.finish_reason).toBe('stop');
    expect(second.tool_calls).toEqual([]);
    expect(second.content).toContain(`search: "${searchOut.slice(0, 40)}"`);
    expect(second.content).toContain(`embed: "${embedOut.slice(0, 40)}"`);
    expect(second.content).not.toContain(searchOut.slice(0, 41));
    expect(server.requests).toBe(2);
  });

  it('agent: with one tool offered it calls it once per turn until two results are in; with none it answers', async () => {
    const messages = goal('count the words [scenario:agent]');
    const only = [TOOLS[1]];
    const one = await chat.complete({ messages, tools: only });
    expect(one.tool_calls.map((t) => [t.name, t.arguments])).toEqual([['search', { query: 'count the words' }]]);
    messages.push(one.message, { role: 'tool', tool_call_id: one.tool_calls[0].id, content: 'first' });
    const two = await chat.complete({ messages, tools: only });
    expect(two.tool_calls.map((t) => t.name)).toEqual(['search']);
    messages.push(two.message, { role: 'tool', tool_call_id: two.tool_calls[0].id, content: 'second' });
    expect((await chat.complete({ messages, tools: only })).finish_reason).toBe('stop');

    const direct = await chat.complete({ messages: goal('no tools here') });
    expect(direct).toMatchObject({ finish_reason: 'stop', tool_calls: [], content: expect.stringContaining('No tools were used') });
  });

  it('malformed_args: the invalid JSON is flagged with the parse error, not thrown', async () => {
    const reply = await chat.complete({ messages: goal('look it up [scenario:malformed_args]'), tools: TOOLS });
    expect(reply.finish_reason).toBe('tool_calls');
    expect(reply.tool_calls).toHaveLength(1);
    const [call] = reply.tool_calls;
    expect(call).toMatchObject({ name: 'search', malformed: true, arguments: '{"query": "look it up"', raw_arguments: '{"query": "look it up"' });
    expect(call.malformed && call.parse_error).toMatch(/JSON/);

    // Told about it, the scripted model recovers and calls the tool properly.
    const messages = goal('look it up [scenario:malformed_args]');
    messages.push(reply.message, { role: 'tool', tool_call_id: call.id, content: 'error: arguments are not valid JSON' });
    const next = await chat.complete({ messages, tools: TOOLS });
    expect(next.tool_calls).toEqual([expect.objectContaining({ name: 'embed', arguments: { text: 'look it up' }, malformed: false })]);
  });

  it('rate_limited: 429 with retryAfterMs 1000 twice for the same conversation, then the reply', async () => {
    const limited = client('scripted-429');
    const request = { messages: goal('summarise the notes'), tools: TOOLS };
    for (let attempt = 1; attempt <= 2; attempt++) {
      const err = await failure(limited.complete(request));
      expect(err).toMatchObject({ kind: 'rate_limited', status: 429, retryAfterMs: 1000 });
      expect(err.message).toMatch(/rate limit/);
      expect(isRetryable(err)).toBe(true);
    }
    const reply = await limited.complete(request);
    expect(reply.finish_reason).toBe('tool_calls');
    expect(server.requests).toBe(3);
    // Another conversation has its own count; the directive names the scenario too.
    const err = await failure(chat.complete({ messages: goal('another one [scenario:rate_limited]') }));
    expect(err.kind).toBe('rate_limited');
  });

  it('server_error: 500 twice for the same conversation, then success; always_500 never succeeds', async () => {
    const flaky = client('scripted-server_error');
    const request = { messages: goal('tidy the workspace'), tools: TOOLS };
    for (let attempt = 1; attempt <= 2; attempt++) {
      const err = await failure(flaky.complete(request));
      expect(err).toMatchObject({ kind: 'server_error', status: 500 });
      expect(err.retryAfterMs).toBeUndefined();
      expect(isRetryable(err)).toBe(true);
    }
    expect((await flaky.complete(request)).finish_reason).toBe('tool_calls');

    const broken = client('scripted-always_500');
    for (let attempt = 1; attempt <= 4; attempt++) {
      expect(await failure(broken.complete(request))).toMatchObject({ kind: 'server_error', status: 500 });
    }
  });

  it("the key's failures come as providers send them, and classify as the evals read them", async () => {
    const cases = [
      ['401', 401, 'model_key_auth'],
      ['403', 403, 'model_key_auth'],
      ['quota', 429, 'model_key_budget'],
      ['402', 402, 'model_key_budget'],
      ['429', 429, 'infra_error'],
    ] as const;
    for (const [scenario, status, classified] of cases) {
      const err = await failure(chat.complete({ messages: goal(`please [scenario:${scenario}]`) }));
      expect(err.status).toBe(status);
      expect(classifyModelError(err)).toBe(classified);
    }
  });

  it('bad_request: 400 with the server message, never retryable; so are unknown models and scenarios', async () => {
    const err = await failure(chat.complete({ messages: goal('please [scenario:bad_request]') }));
    expect(err).toMatchObject({ kind: 'bad_request', status: 400 });
    expect(err.message).toMatch(/scripted bad request/);
    expect(isRetryable(err)).toBe(false);
    expect(err.retryable).toBe(false);

    const unknownModel = await failure(client('gpt-nonexistent').complete({ messages: goal('hi') }));
    expect(unknownModel).toMatchObject({ kind: 'bad_request', status: 400 });
    expect(unknownModel.message).toMatch(/model 'gpt-nonexistent' does not exist/);

    const unknownScenario = await failure(chat.complete({ messages: goal('hi [scenario:nope]') }));
    expect(unknownScenario.message).toMatch(/unknown scenario 'nope'/);

    const tooBig = await failure(chat.complete({ messages: goal('x'.repeat(MAX_BODY_BYTES + 1)) }));
    expect(tooBig).toMatchObject({ kind: 'bad_request', status: 413 });
  });

  it('length: a truncated answer is returned with finish_reason length, not thrown', async () => {
    const reply = await client('scripted-length').complete({ messages: goal('write an essay'), max_tokens: 3 });
    expect(reply).toMatchObject({ finish_reason: 'length', content: 'The answer to', tool_calls: [] });
    expect(reply.usage?.completion_tokens).toBe(3);
  });

  it('slow: a 200 ms client timeout gives a retryable timeout; a short delay is answered', async () => {
    const impatient = client('scripted-slow', 200);
    const started = Date.now();
    const err = await failure(impatient.complete({ messages: goal('take your time'), tools: TOOLS }));
    expect(err.kind).toBe('timeout');
    expect(isRetryable(err)).toBe(true);
    expect(Date.now() - started).toBeLessThan(1500);

    const reply = await client('scripted').complete({ messages: goal('quick [scenario:slow] [delay:50]'), tools: TOOLS });
    expect(reply.tool_calls.map((t) => t.arguments)).toEqual([{ query: 'quick' }, { text: 'quick' }]);
  });

  it("the caller's abort signal is passed through as its own reason", async () => {
    const controller = new AbortController();
    const reason = new Error('activity cancelled');
    const pending = chat.complete({ messages: goal('wait [scenario:slow] [delay:5000]') }, controller.signal);
    setTimeout(() => controller.abort(reason), 50);
    await expect(pending).rejects.toBe(reason);
    await expect(chat.complete({ messages: goal('hi') }, controller.signal)).rejects.toBe(reason);
  });

  it('a closed server is a retryable network error', async () => {
    await chat.complete({ messages: goal('hello') });
    await server.close();
    const err = await failure(chat.complete({ messages: goal('hello again') }));
    expect(err.kind).toBe('network');
    expect(err.status).toBeUndefined();
    expect(isRetryable(err)).toBe(true);
  });

  it('is deterministic: the same request gives the identical reply, on this server and a fresh one', async () => {
    const request = { messages: goal('find the memory leak'), tools: TOOLS };
    const a = await chat.complete(request);
    const b = await chat.complete(request);
    expect(b).toEqual(a);
    const other = await startModelServer({ port: 0 });
    try {
      const c = await createChatClient({ baseUrl: other.url, model: 'scripted', timeoutMs: 5000 }).complete(request);
      expect(c).toEqual(a);
    } finally {
      await other.close();
    }
    // The raw bodies are identical too (id, created: 0, usage).
    const raw = async () => (await fetch(`${server.url}/chat/completions`, post({ model: 'scripted', ...request }))).text();
    const first = await raw();
    expect(await raw()).toBe(first);
    expect(JSON.parse(first)).toMatchObject({ id: expect.stringMatching(/^chatcmpl-/), object: 'chat.completion', created: 0, model: 'scripted' });
  });

  it('serves /v1/models and /healthz, and answers malformed bodies with an OpenAI-style 400', async () => {
    const origin = server.url.replace(/\/v1$/, '');
    expect(await (await fetch(`${origin}/healthz`)).json()).toEqual({ status: 'ok' });
    const models = (await (await fetch(`${server.url}/models`)).json()) as { data: { id: string }[] };
    expect(models.data.map((m) => m.id)).toEqual(expect.arrayContaining(['scripted', 'scripted-agent', 'scripted-429', 'scripted-slow']));

    const malformed = [
      '{not json',
      '[]',
      JSON.stringify({ model: 'scripted', messages: [] }),
      JSON.stringify({ model: 'scripted', messages: [{ role: 'robot', content: 'x' }] }),
    ];
    for (const body of malformed) {
      const res = await fetch(`${origin}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({ error: expect.objectContaining({ message: expect.any(String), type: 'invalid_request_error' }) });
    }
    expect((await fetch(`${origin}/nowhere`)).status).toBe(404);
    expect((await fetch(`${server.url}/chat/completions`)).status).toBe(405);
  });
});

describe('streaming (stream: true)', () => {
  let server: ModelServer;
  const client = (model = 'scripted') => createChatClient({ baseUrl: server.url, model, timeoutMs: 5000 });
  const plainBody = async (body: Record<string, unknown>) => (await fetch(`${server.url}/chat/completions`, post(body))).json() as Promise<Completion>;

  beforeEach(async () => {
    server = await startModelServer({ port: 0 });
  });
  afterEach(() => server.close());

  it('sends the reply as chunks: the role, the content word by word, the finish reason, the usage it reports unstreamed, [DONE]', async () => {
    const request = { model: 'scripted', messages: goal('no tools here') };
    const plain = await plainBody(request);
    const res = await fetch(`${server.url}/chat/completions`, post({ ...request, stream: true, stream_options: { include_usage: true } }));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const events = eventsOf(await res.text());
    expect(events.pop()).toBe('[DONE]');
    const chunks = events as Chunk[];
    for (const chunk of chunks) expect(chunk).toMatchObject({ id: chunks[0].id, object: 'chat.completion.chunk', created: 0, model: 'scripted' });
    expect(chunks[0].id).toMatch(/^chatcmpl-/);

    const [first, ...rest] = chunks;
    const usage = rest.pop()!;
    const finish = rest.pop()!;
    expect(first.choices).toEqual([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null, logprobs: null }]);
    const pieces = rest.map((c) => c.choices[0].delta.content!);
    expect(pieces.length).toBeGreaterThan(3);
    for (const piece of pieces) expect(piece).toMatch(/^\S+\s*$/);
    expect(pieces.join('')).toBe(plain.choices[0].message.content);
    expect(finish.choices).toEqual([{ index: 0, delta: {}, finish_reason: 'stop', logprobs: null }]);
    expect(usage).toMatchObject({ choices: [], usage: plain.usage });
    expect(rest.every((c) => c.usage === null)).toBe(true);

    // Without include_usage: no usage chunk, and no `usage` member on the others.
    const bare = eventsOf(await (await fetch(`${server.url}/chat/completions`, post({ ...request, stream: true }))).text());
    expect(bare).toHaveLength(chunks.length);
    expect(bare.slice(0, -1).every((c) => !('usage' in (c as Chunk)))).toBe(true);
  });

  it('sends tool calls as pieces, id and name first, whose arguments join back to the unstreamed call', async () => {
    const request = { model: 'scripted', messages: goal('find the memory leak'), tools: TOOLS };
    const plain = await plainBody(request);
    const events = eventsOf(await (await fetch(`${server.url}/chat/completions`, post({ ...request, stream: true }))).text());
    const deltas = (events.slice(1, -1) as Chunk[]).map((c) => c.choices[0]);
    expect(deltas.pop()).toEqual({ index: 0, delta: {}, finish_reason: 'tool_calls', logprobs: null });
    const pieces = deltas.flatMap((d) => d.delta.tool_calls!);
    const calls: { id: string; type: string; function: { name: string; arguments: string } }[] = [];
    // A piece with an id opens the next call (its id and name, no arguments yet); every other one adds to the open call's arguments.
    const text = expect.any(String);
    for (const piece of pieces) {
      const opens = piece.id !== undefined;
      expect(piece).toEqual(opens ? { index: calls.length, id: text, type: 'function', function: { name: text, arguments: '' } } : { index: calls.length - 1, function: { arguments: text } });
      if (opens) calls.push({ id: piece.id!, type: 'function', function: { name: piece.function.name!, arguments: '' } });
      else calls[piece.index].function.arguments += piece.function.arguments;
    }
    expect(pieces.length).toBeGreaterThan(calls.length * 2);
    expect(calls).toEqual(plain.choices[0].message.tool_calls);
  });

  it('is deterministic, and answers errors as plain JSON with their status, as without a stream', async () => {
    const request = { model: 'scripted', messages: goal('find the memory leak'), tools: TOOLS, stream: true, stream_options: { include_usage: true } };
    const raw = async () => (await fetch(`${server.url}/chat/completions`, post(request))).text();
    const first = await raw();
    expect(await raw()).toBe(first);

    const limited = await fetch(`${server.url}/chat/completions`, post({ ...request, model: 'scripted-429' }));
    expect(limited.status).toBe(429);
    expect(limited.headers.get('content-type')).toBe('application/json');
    expect(limited.headers.get('retry-after')).toBe('1');
    expect(await limited.json()).toMatchObject({ error: { type: 'rate_limit_error', code: 'rate_limit_exceeded' } });
    const broken = await fetch(`${server.url}/chat/completions`, post({ ...request, model: 'scripted-always_500' }));
    expect([broken.status, broken.headers.get('content-type')]).toEqual([500, 'application/json']);
  });

  it('refuses a stream or stream_options of the wrong type with a 400', async () => {
    const base = { model: 'scripted', messages: goal('hi') };
    const cases: [Record<string, unknown>, string][] = [
      [{ stream: 'yes' }, "'stream' must be a boolean"],
      [{ stream: true, stream_options: 5 }, "'stream_options' must be an object"],
      [{ stream: true, stream_options: { include_usage: 'yes' } }, "'stream_options.include_usage' must be a boolean"],
      [{ stream_options: { include_usage: true } }, "'stream_options' is only allowed with 'stream: true'"],
    ];
    for (const [extra, message] of cases) {
      const res = await fetch(`${server.url}/chat/completions`, post({ ...base, ...extra }));
      expect({ extra, status: res.status, body: await res.json() }).toEqual({ extra, status: 400, body: { error: expect.objectContaining({ message, type: 'invalid_request_error' }) } });
    }
  });

  it('the client gets the same reply streamed as not, its deltas joining into the content', async () => {
    const messages = goal('find the memory leak');
    const requests = [
      { messages: goal('no tools here') },
      { messages, tools: TOOLS },
      { messages: goal('look it up [scenario:malformed_args]'), tools: TOOLS },
      { messages: goal('write an essay [scenario:length]'), max_tokens: 5 },
      { messages: goal('What is the capital of Peru? [answer:  Lima, the City of Kings ]') },
    ];
    for (const request of requests) {
      const deltas: string[] = [];
      const streamed = await client().complete(request, undefined, { onDelta: (delta) => void deltas.push(delta) });
      const plain = await client().complete(request);
      expect(streamed).toEqual(plain);
      expect(deltas.join('')).toBe(plain.content ?? '');
    }
  });

  it('rate_limited streams nothing: the 429 is rate_limited with its retryAfterMs, then the reply streams', async () => {
    const request = { messages: goal('summarise the notes [scenario:429]'), tools: TOOLS };
    const stream = { onDelta: () => undefined };
    for (let attempt = 1; attempt <= 2; attempt++) {
      expect(await failure(client().complete(request, undefined, stream))).toMatchObject({ kind: 'rate_limited', status: 429, retryAfterMs: 1000 });
    }
    expect((await client().complete(request, undefined, stream)).finish_reason).toBe('tool_calls');
  });

  it('[pace:MS] spaces the chunks, so the first delta comes well before the reply ends; a slow delay comes before it', async () => {
    const paceMs = 40;
    const started = performance.now();
    const deltas: { at: number; text: string }[] = [];
    const reply = await client().complete({ messages: goal(`no tools here [scenario:slow] [delay:100] [pace:${paceMs}]`) }, undefined, {
      onDelta: (text) => void deltas.push({ at: performance.now(), text }),
    });
    const ended = performance.now();
    expect(deltas.map((d) => d.text).join('')).toBe(reply.content);
    // After the first piece of content: the other pieces, the finish chunk, the usage chunk and [DONE], a pause before each.
    expect(ended - deltas[0].at).toBeGreaterThanOrEqual(paceMs * deltas.length);
    // The delay, then a pause before the first piece (timers may fire a millisecond early by the clock).
    expect(deltas[0].at - started).toBeGreaterThanOrEqual(100 + paceMs - 5);
  });

  it('close() drops a paced stream under way', async () => {
    const res = await fetch(`${server.url}/chat/completions`, post({ model: 'scripted', messages: goal('never finished [pace:60000]'), stream: true }));
    expect(res.status).toBe(200);
    await server.close();
    await expect(res.text()).rejects.toThrow();
  });
});

type Completion = { choices: { message: { content: string | null; tool_calls?: unknown[] } }[]; usage: unknown };

interface Chunk {
  id: string;
  choices: { index: number; delta: { content?: string; tool_calls?: { index: number; id?: string; function: { name?: string; arguments: string } }[] } }[];
  usage?: unknown;
}

/** The events of a server-sent-event body: each `data:` line's JSON, `[DONE]` as it is. */
function eventsOf(body: string): unknown[] {
  expect(body.endsWith('\n\n')).toBe(true);
  return body
    .slice(0, -2)
    .split('\n\n')
    .map((event) => {
      expect(event).toMatch(/^data: /);
      const data = event.slice('data: '.length);
      return data === '[DONE]' ? data : (JSON.parse(data) as unknown);
    });
}

function post(body: unknown): RequestInit {
  return { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) };
}

// ---------------------------------------------------------------------------------------------
// Eval rules
// ---------------------------------------------------------------------------------------------

const README = readFileSync(join(__dirname, '..', '..', '..', 'README.md'), 'utf8');

/** The expected score the README documents for a suite: `k/n` in its row of the eval rules table. */
function documentedScore(suite: string): { right: number; cases: number } {
  const row = new RegExp(`^\\| \`${suite}\` \\|.*\\| (\\d+)/(\\d+) \\|`, 'm').exec(README);
  if (!row) throw new Error(`README.md has no expected-score row for the suite '${suite}'`);
  return { right: Number(row[1]), cases: Number(row[2]) };
}

/** The judge prompt of the `model_graded` scorer, byte for byte. */
function gradingPrompt(g: { question: string; targets: string[]; submission: string; rubric?: string }): string {
  return [
    '[grading]',
    '<question>',
    g.question,
    '</question>',
    '<target>',
    ...g.targets,
    '</target>',
    '<submission>',
    g.submission,
    '</submission>',
    '<rubric>',
    g.rubric ?? 'The submission is correct if it states the target answer; extra words are fine.',
    '</rubric>',
    'Explain briefly, then end with one line: GRADE: C (correct), GRADE: P (partly correct) or GRADE: I (incorrect).',
  ].join('\n');
}

const ALL_TOOLS: ToolSpec[] = TOOL_NAMES.map((name) => toolFunctionSpec(name));
const TOOLS_BY_NAME = new Map([...CPU_TOOLS, ...GPU_TOOLS].map((t) => [t.name as string, t]));

interface FileCheck {
  path: string;
  exists?: boolean;
  contains?: string;
  matches?: string;
}

async function checkPasses(workspace: Workspace, check: FileCheck): Promise<boolean> {
  let text: string | undefined;
  try {
    text = await workspace.read(check.path);
  } catch {
    text = undefined;
  }
  if (check.exists !== undefined) return (text !== undefined) === check.exists;
  if (text === undefined) return false;
  if (check.contains !== undefined) return text.includes(check.contains);
  return new RegExp(check.matches!).test(text);
}

describe('eval rules of the deterministic model server', () => {
  let server: ModelServer;
  let root: string;
  const client = (model = 'scripted') => createChatClient({ baseUrl: server.url, model, timeoutMs: 5000 });
  const ask = (text: string, model = 'scripted') => client(model).complete({ messages: goal(text) });

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'model-server-evals-'));
  });
  afterAll(() => rm(root, { recursive: true, force: true }));
  beforeEach(async () => {
    server = await startModelServer({ port: 0 });
  });
  afterEach(() => server.close());

  describe('[answer: X]', () => {
    it('is answered with exactly X, trimmed, finish_reason stop, usage counted by words', async () => {
      const reply = await ask('What is the capital of Peru? [answer:  Lima, the City of Kings ]');
      expect(reply).toMatchObject({ content: 'Lima, the City of Kings', finish_reason: 'stop', tool_calls: [] });
      // prompt: 'You are a careful agent.' (5) + the question with its directive (13); completion: 5 words.
      expect(reply.usage).toEqual({ prompt_tokens: 18, completion_tokens: 5, total_tokens: 23 });
    });

    it('ends an agent conversation at once, tools offered or not', async () => {
      const reply = await client().complete({ messages: goal('Parse the file data/x.csv. [answer: nothing to parse]'), tools: TOOLS });
      expect(reply).toMatchObject({ content: 'nothing to parse', finish_reason: 'stop', tool_calls: [] });
    });

    it('composes with failure scenarios: the failures come first, then X', async () => {
      const request = { messages: goal('[scenario:500] tell me [answer: 42]') };
      for (let attempt = 1; attempt <= 2; attempt++) expect(await failure(client().complete(request))).toMatchObject({ status: 500 });
      expect((await client().complete(request)).content).toBe('42');

      const limited = { messages: goal('and again [answer: 43]') };
      for (let attempt = 1; attempt <= 2; attempt++) expect(await failure(client('scripted-429').complete(limited))).toMatchObject({ status: 429 });
      expect((await client('scripted-429').complete(limited)).content).toBe('43');

      const malformed = goal('look it up [scenario:malformed_args] [answer: found it]');
      const first = await client().complete({ messages: malformed, tools: TOOLS });
      expect(first.tool_calls[0]).toMatchObject({ malformed: true });
      malformed.push(first.message, { role: 'tool', tool_call_id: first.tool_calls[0].id, content: 'error: arguments are not valid JSON' });
      expect((await client().complete({ messages: malformed, tools: TOOLS })).content).toBe('found it');
    });
  });

  describe('[call: <tool> <JSON arguments>]', () => {
    const WRITE: ToolSpec = { type: 'function', function: { name: 'write_file', parameters: { type: 'object', properties: { path: { type: 'string' }, content: { type: 'string' } } } } };

    it('plays the calls of the instructions and the goal in order, one per turn, then the answer', async () => {
      const messages: ChatMessage[] = [
        { role: 'system', content: 'You fix code. [call: write_file {"path": "fix.py", "content": "x = [1]\\n"}]' },
        { role: 'user', content: 'Make the test pass. [call: exec {"command": "python3 -m pytest -q"}] [answer: the test passes]' },
      ];
      const calls: { name: string; args: unknown }[] = [];
      for (let turn = 0; turn < 2; turn++) {
        const reply = await client().complete({ messages, tools: [WRITE] });
        expect(reply).toMatchObject({ finish_reason: 'tool_calls', content: null });
        expect(reply.tool_calls).toHaveLength(1);
        const [call] = reply.tool_calls;
        calls.push({ name: call.name, args: call.arguments });
        messages.push(reply.message, { role: 'tool', tool_call_id: call.id, content: `result ${turn + 1}` });
      }
      // exec is called though only write_file is offered: the directive is played as written.
      expect(calls).toEqual([
        { name: 'write_file', args: { path: 'fix.py', content: 'x = [1]\n' } },
        { name: 'exec', args: { command: 'python3 -m pytest -q' } },
      ]);
      expect(await client().complete({ messages, tools: [WRITE] })).toMatchObject({ content: 'the test passes', finish_reason: 'stop', tool_calls: [] });
    });

    it('without [answer:], the last turn sums up the results', async () => {
      const messages: ChatMessage[] = goal('[call: grep {"pattern": "TODO"}]');
      const reply = await client().complete({ messages, tools: TOOLS });
      messages.push(reply.message, { role: 'tool', tool_call_id: reply.tool_calls[0].id, content: 'a.py:3:# TODO' });
      expect((await client().complete({ messages, tools: TOOLS })).content).toBe('Done with "the task". Findings: grep: "a.py:3:# TODO".');
    });

    it('a malformed directive is a 400 that says what is wrong, never retried', async () => {
      const err = await failure(ask('do it [call: exec {"command": "ls"'));
      expect(err).toMatchObject({ kind: 'bad_request', status: 400 });
      expect(err.message).toMatch(/message 2 \(user\): \[call: exec at character 6 has no complete JSON value after the tool name/);
    });
  });

  describe('shipped generate suites', () => {
    const scorers: Record<string, (output: string, target: string | string[]) => Score> = { exact, choice };

    it('wrong answers: a number plus one, the next letter, else I do not know', () => {
      expect(['391', '-33', '2.5', 'A', 'B', 'D', 'Paris', 'H2O'].map(wrongAnswer)).toEqual(['392', '-32', '3.5', 'B', 'C', 'A', DONT_KNOW, DONT_KNOW]);
    });

    it('the seeded subset is the sha256 rule, fixed per suite and case', () => {
      expect(seededRight('qa', 'qa-capital-france')).toBe(true);
      expect(seededRight('qa', 'qa-capital-kenya')).toBe(false);
      expect(seededRight('mcq', 'mcq-bits-in-byte')).toBe(false);
      // The same case id under another suite rolls again.
      const qa = loadSuite('qa').cases.map((c) => c.id);
      expect(qa.filter((id) => seededRight('qa', id))).not.toEqual(qa.filter((id) => seededRight('mcq', id)));
    });

    it.each(['qa', 'mcq'] as const)('%s: the seeded subset is answered right, the rest wrong; the score is the one the README documents', async (suite) => {
      const { manifest, cases } = loadSuite(suite);
      const [scorerName] = manifest.scorers as string[];
      const right = new Set(answeredRight(suite));
      let total = 0;
      for (const c of cases) {
        // As the generate solver asks: an optional system prompt, then the input verbatim (whitespace aside).
        const reply = await client().complete({ messages: [{ role: 'system', content: 'Answer the question.' }, { role: 'user', content: `\n${c.input as string}  ` }] });
        expect(reply.finish_reason).toBe('stop');
        const first = Array.isArray(c.target) ? c.target[0] : c.target;
        expect({ id: c.id, content: reply.content }).toEqual({ id: c.id, content: right.has(c.id) ? first : wrongAnswer(first) });
        const score = scorers[scorerName](reply.content!, c.target);
        expect({ id: c.id, score: score.value }).toEqual({ id: c.id, score: right.has(c.id) ? 1 : 0 });
        total += score.value;
      }
      expect(right.size).toBeGreaterThan(0);
      expect(right.size).toBeLessThan(cases.length);
      expect({ right: total, cases: cases.length }).toEqual(documentedScore(suite));
    });

    it('a case input inside a longer message is not a case: the agent scenario answers', async () => {
      const [c] = loadSuite('qa').cases;
      const reply = await client().complete({ messages: goal(`${c.input as string} Take your time.`), tools: TOOLS });
      expect(reply.finish_reason).toBe('tool_calls');
    });
  });

  describe('shipped agent suite', () => {
    /** Runs a case as the `llm` policy would: its conversation, its step numbers, the real tools on a real workspace. */
    async function runAgentCase(c: SuiteCase): Promise<{ workspace: Workspace; answer: string; calls: string[]; results: string[] }> {
      const workspace = new Workspace(root, 'evals', c.id);
      await workspace.write('goal.md', `# Goal\n\n${c.input as string}\n`);
      for (const [path, text] of Object.entries(c.files ?? {})) await workspace.write(path, text);
      let conversation = startConversation(c.input as string);
      const calls: string[] = [];
      const results: string[] = [];
      for (let step = 0; step < 10; step++) {
        const next = planLlm({ step, max_steps: 10, conversation });
        if (next.kind === 'finish') break;
        if (next.kind === 'llm') {
          const reply = await client().complete({ messages: conversation.messages as ChatMessage[], tools: ALL_TOOLS });
          const toolCalls = reply.tool_calls.map((t) => ({ id: t.id, name: t.name, arguments: t.raw_arguments }));
          conversation = applyReply(conversation, { key: `${c.id}:${step}`, content: reply.content ?? '', tool_calls: toolCalls, finish_reason: reply.finish_reason ?? 'stop', attempt: 1, duplicate: false });
          continue;
        }
        if (next.kind !== 'tool') throw new Error(`the llm policy never plans a ${next.kind} step`);
        calls.push(`${next.tool} ${JSON.stringify(next.args)} at step ${step}`);
        let output: string;
        try {
          output = await TOOLS_BY_NAME.get(next.tool)!.run(next.args, { workspace, step, heartbeat: () => undefined });
        } catch (err) {
          if (!(err instanceof BadArguments)) throw err;
          output = `error: ${err.message}`;
        }
        results.push(output);
        conversation = applyToolResult(conversation, next.call_id!, output);
      }
      if (conversation.answer === undefined) throw new Error(`${c.id}: no answer within 10 steps`);
      return { workspace, answer: conversation.answer, calls, results };
    }

    it('the seeded subset calls the tool its goal names and leaves every check true; the rest fetch and leave none', async () => {
      const { cases } = loadSuite('agent');
      const right = new Set(answeredRight('agent'));
      let total = 0;
      for (const c of cases) {
        const run = await runAgentCase(c);
        const reference = c.metadata!.reference_call as { tool: string; args: Record<string, string> };
        const fetched = reference.args.path ?? Object.keys(c.files!)[0];
        expect({ id: c.id, calls: run.calls }).toEqual({
          id: c.id,
          calls: [right.has(c.id) ? `${reference.tool} ${JSON.stringify(reference.args)} at step 1` : `fetch ${JSON.stringify({ path: fetched })} at step 1`],
        });
        expect(run.answer).toBe(`done: ${[...run.results[0]].slice(0, 40).join('')}`);
        // The target is what a right run's answer quotes, and a wrong run's does not.
        expect({ id: c.id, includes: includes(run.answer, c.target).value }).toEqual({ id: c.id, includes: right.has(c.id) ? 1 : 0 });
        const checks = c.metadata!.checks as FileCheck[];
        const passed = await Promise.all(checks.map((check) => checkPasses(run.workspace, check)));
        expect({ id: c.id, passed }).toEqual({ id: c.id, passed: checks.map(() => right.has(c.id)) });
        total += passed.filter(Boolean).length / checks.length;
      }
      expect(right.size).toBeGreaterThan(0);
      expect(right.size).toBeLessThan(cases.length);
      expect({ right: total, cases: cases.length }).toEqual(documentedScore('agent'));
    });

    it('without the tool on offer it answers instead of calling it', async () => {
      const c = loadSuite('agent').cases.find((k) => seededRight('agent', k.id) && (k.metadata!.reference_call as { tool: string }).tool === 'parse')!;
      const reply = await client().complete({ messages: startConversation(c.input as string).messages as ChatMessage[], tools: TOOLS });
      expect(reply).toMatchObject({ finish_reason: 'stop', tool_calls: [], content: "I cannot do this: the 'parse' tool is not offered." });
    });
  });

  describe('the judge of model_graded', () => {
    const judgeOf = (prompt: string, model = 'scripted') => client(model).complete({ messages: [{ role: 'user', content: prompt }] });

    it('grades C when the normalised submission contains a target line, naming it', async () => {
      const prompt = gradingPrompt({ question: 'What is the capital of France?', targets: ['Lutetia', 'Paris'], submission: 'It is\n  PARIS,   of course.' });
      expect((await judgeOf(prompt)).content).toBe("The submission contains 'Paris'.\nGRADE: C");
      const spaced = gradingPrompt({ question: 'Who wrote it?', targets: ['William   Shakespeare'], submission: 'william shakespeare' });
      expect((await judgeOf(spaced)).content).toBe("The submission contains 'William   Shakespeare'.\nGRADE: C");
    });

    it('grades I when no target is in the submission', async () => {
      const prompt = gradingPrompt({ question: 'What is the capital of France?', targets: ['Paris'], submission: 'Lyon' });
      expect(await judgeOf(prompt)).toMatchObject({ content: 'The submission does not contain any target.\nGRADE: I', finish_reason: 'stop' });
    });

    it('takes scenarios from the question only, and is not an [answer:] or a shipped case', async () => {
      const failing = gradingPrompt({ question: 'What is 2 + 2? [scenario:500]', targets: ['4'], submission: '4' });
      for (let attempt = 1; attempt <= 2; attempt++) expect(await failure(judgeOf(failing))).toMatchObject({ kind: 'server_error', status: 500 });
      expect((await judgeOf(failing)).content).toBe("The submission contains '4'.\nGRADE: C");
      expect(await failure(judgeOf(gradingPrompt({ question: 'x [scenario:always_500]', targets: ['4'], submission: '4' })))).toMatchObject({ status: 500 });

      const quiet = gradingPrompt({ question: 'What is 2 + 2? [answer: 4]', targets: ['4'], submission: 'five [scenario:always_500] [answer: four]', rubric: 'Exact. [scenario:bad_request]' });
      expect((await judgeOf(quiet)).content).toBe('The submission does not contain any target.\nGRADE: I');
      const qa = loadSuite('qa').cases[0];
      const shipped = gradingPrompt({ question: qa.input as string, targets: [qa.target as string], submission: qa.target as string });
      expect((await judgeOf(shipped)).content).toBe(`The submission contains '${qa.target as string}'.\nGRADE: C`);
    });

    it('a malformed grading prompt is a 400 that says what is missing', async () => {
      const err = await failure(judgeOf('[grading]\n<question>\nx\n</question>\n<submission>\ny\n</submission>'));
      expect(err).toMatchObject({ kind: 'bad_request', status: 400 });
      expect(err.message).toMatch(/<question>, <target>, <submission> and <rubric>/);
    });
  });
});
