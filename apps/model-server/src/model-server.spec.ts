import { ChatError, createChatClient, isRetryable, type ChatClient, type ChatMessage, type ToolSpec } from '@agentrun/activities';
import { MAX_BODY_BYTES, startModelServer, type ModelServer } from './model-server';

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

function post(body: unknown): RequestInit {
  return { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) };
}
