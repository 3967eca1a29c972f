import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-node';
import { AgentRunMetrics, initTracing, resetTracingForTests, tracingState } from '@agentrun/telemetry';
import { ChatError, classifyModelError, createChatClient, isRetryable, retryAfter, type ChatMessage, type ChatReply } from './client';

/**
 * The chat client against plain HTTP servers on 127.0.0.1 that answer what each test sets (the deterministic
 * model server has its own tests in apps/model-server, streaming against it included: a library may not
 * import an app).
 */

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

describe('chat client against other servers', () => {
  let http: Server;
  let baseUrl: string;
  let seen: { headers: IncomingHttpHeaders; url?: string; body: string }[];
  /**
   * `stall`: send the headers and the first half of the body, then nothing until the client gives up.
   * `cut`: send the headers and the first half of the body, then drop the connection.
   */
  let answer: { status: number; body: string; headers?: Record<string, string>; stall?: boolean; cut?: boolean };

  beforeEach(async () => {
    seen = [];
    http = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (chunk: string) => (body += chunk));
      req.on('end', () => {
        seen.push({ headers: req.headers, url: req.url, body });
        res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
        if (answer.cut) res.write(answer.body.slice(0, answer.body.length / 2), () => res.destroy());
        else if (answer.stall) res.write(answer.body.slice(0, answer.body.length / 2));
        else res.end(answer.body);
      });
    });
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(http.address() as AddressInfo).port}/v1/`;
  });
  afterEach(() => {
    http.closeAllConnections();
    return new Promise<void>((resolve) => http.close(() => resolve()));
  });

  const ok = (message: unknown, extra: Record<string, unknown> = {}) =>
    JSON.stringify({ id: 'x', object: 'chat.completion', created: 1, model: 'real-model-2', choices: [{ index: 0, message, finish_reason: 'stop' }], ...extra });

  it('posts the OpenAI request with a bearer key, and reads a reply without usage', async () => {
    answer = { status: 200, body: ok({ role: 'assistant', content: 'hello' }) };
    const chat = createChatClient({ baseUrl, apiKey: 'sk-test', model: 'real-model', timeoutMs: 2000 });
    const reply: ChatReply = await chat.complete({ messages: goal('hi'), tools: [], max_tokens: 7 });
    expect(seen[0].url).toBe('/v1/chat/completions');
    expect(seen[0].headers.authorization).toBe('Bearer sk-test');
    expect(JSON.parse(seen[0].body)).toEqual({ model: 'real-model', messages: goal('hi'), max_tokens: 7 });
    expect(reply).toEqual({
      content: 'hello',
      tool_calls: [],
      finish_reason: 'stop',
      usage: null,
      model: 'real-model-2',
      message: { role: 'assistant', content: 'hello' },
    });

    await createChatClient({ baseUrl, model: 'm', timeoutMs: 2000 }).complete({ messages: goal('hi') });
    expect(seen[1].headers.authorization).toBeUndefined();
  });

  it('flags arguments that are JSON but not an object', async () => {
    const call = (id: string, args: string) => ({ id, type: 'function', function: { name: 'search', arguments: args } });
    answer = { status: 200, body: ok({ role: 'assistant', content: null, tool_calls: [call('a', '[1]'), call('b', '"q"'), call('c', '{"query":"q"}')] }) };
    const reply = await createChatClient({ baseUrl, model: 'm', timeoutMs: 2000 }).complete({ messages: goal('hi') });
    expect(reply.tool_calls.map((t) => t.malformed)).toEqual([true, true, false]);
    expect(reply.tool_calls[0]).toMatchObject({ arguments: '[1]', parse_error: 'arguments must be a JSON object, got an array' });
  });

  it('non-JSON bodies and replies without choices are retryable bad_response errors', async () => {
    const chat = createChatClient({ baseUrl, model: 'm', timeoutMs: 2000 });
    for (const body of ['<html>gateway</html>', JSON.stringify({ choices: [] }), JSON.stringify({ object: 'chat.completion' })]) {
      answer = { status: 200, body };
      const err = await failure(chat.complete({ messages: goal('hi') }));
      expect(err.kind).toBe('bad_response');
      expect(isRetryable(err)).toBe(true);
    }
  });

  it('classifies statuses: 401/404/422 are bad_request, 503 is server_error with its Retry-After', async () => {
    const chat = createChatClient({ baseUrl, model: 'm', timeoutMs: 2000 });
    for (const status of [401, 404, 422]) {
      answer = { status, body: JSON.stringify({ error: { message: `nope ${status}`, type: 'invalid_request_error' } }) };
      const err = await failure(chat.complete({ messages: goal('hi') }));
      expect(err).toMatchObject({ kind: 'bad_request', status });
      expect(err.message).toContain(`nope ${status}`);
      expect(isRetryable(err)).toBe(false);
    }
    answer = { status: 503, body: 'overloaded', headers: { 'retry-after': '2.5' } };
    expect(await failure(chat.complete({ messages: goal('hi') }))).toMatchObject({ kind: 'server_error', status: 503, retryAfterMs: 2500 });
    expect(isRetryable(new Error('not ours'))).toBe(false);
  });

  it('sends temperature and stop when given, and leaves an empty stop list out', async () => {
    answer = { status: 200, body: ok({ role: 'assistant', content: 'ok' }) };
    const chat = createChatClient({ baseUrl, model: 'm', timeoutMs: 2000 });
    await chat.complete({ messages: goal('hi'), temperature: 0, stop: ['\n\n', 'END'] });
    await chat.complete({ messages: goal('hi'), stop: [] });
    expect(JSON.parse(seen[0].body)).toEqual({ model: 'm', messages: goal('hi'), temperature: 0, stop: ['\n\n', 'END'] });
    expect(JSON.parse(seen[1].body)).toEqual({ model: 'm', messages: goal('hi') });
  });

  it('a success body that is text, not JSON, is a retryable bad_response', async () => {
    answer = { status: 200, body: 'upstream says hi', headers: { 'content-type': 'text/plain' } };
    const err = await failure(createChatClient({ baseUrl, model: 'm', timeoutMs: 2000 }).complete({ messages: goal('hi') }));
    expect(err.kind).toBe('bad_response');
    expect(err.message).toContain('upstream says hi');
  });

  it('the timeout covers reading the body, not only waiting for the headers', async () => {
    answer = { status: 200, body: ok({ role: 'assistant', content: 'never finished' }), stall: true };
    const started = Date.now();
    const err = await failure(createChatClient({ baseUrl, model: 'm', timeoutMs: 300 }).complete({ messages: goal('hi') }));
    expect(err.kind).toBe('timeout');
    expect(Date.now() - started).toBeLessThan(1500);
  });

  it("the caller's abort while the body is read rethrows the caller's reason", async () => {
    answer = { status: 200, body: ok({ role: 'assistant', content: 'never finished' }), stall: true };
    const controller = new AbortController();
    const reason = new Error('activity cancelled');
    const pending = createChatClient({ baseUrl, model: 'm', timeoutMs: 5000 }).complete({ messages: goal('hi') }, controller.signal);
    // Abort once the server has seen the request (the headers are on their way by then).
    while (seen.length === 0) await new Promise((resolve) => setImmediate(resolve));
    controller.abort(reason);
    await expect(pending).rejects.toBe(reason);
  });

  it("keeps the error body's code and type, and the message of a body without an `error` member", async () => {
    const chat = createChatClient({ baseUrl, model: 'm', timeoutMs: 2000 });
    answer = { status: 400, body: JSON.stringify({ error: { message: 'bad tool schema', type: 'invalid_request_error', code: 'invalid_tools', param: 'tools' } }) };
    expect(await failure(chat.complete({ messages: goal('hi') }))).toMatchObject({ kind: 'bad_request', status: 400, code: 'invalid_tools', type: 'invalid_request_error' });

    // The shape some self-hosted servers answer with: the fields at the top level, `code` a number.
    answer = { status: 400, body: JSON.stringify({ object: 'error', message: 'context too long', type: 'BadRequestError', code: 400 }) };
    const flat = await failure(chat.complete({ messages: goal('hi') }));
    expect(flat).toMatchObject({ kind: 'bad_request', code: '400', type: 'BadRequestError' });
    expect(flat.message).toMatch(/HTTP 400: context too long$/);

    answer = { status: 502, body: '' };
    const empty = await failure(chat.complete({ messages: goal('hi') }));
    expect(empty.message).toMatch(/HTTP 502$/);
    expect(empty.code).toBeUndefined();
  });

  it('402, 401 and 403 bodies: a spent budget and a refused key are told apart from a bad request', async () => {
    const chat = createChatClient({ baseUrl, model: 'm', timeoutMs: 2000 });
    const cases: [number, Record<string, unknown>, string | undefined][] = [
      [402, { message: 'Insufficient credits. Add more using https://example.test/settings', code: 402 }, 'model_key_budget'],
      [402, { message: 'Payment required' }, 'model_key_budget'],
      [401, { message: 'Incorrect API key provided: sk-xx', type: 'invalid_request_error', code: 'invalid_api_key' }, 'model_key_auth'],
      [403, { message: 'Project does not have access to model m', type: 'invalid_request_error', code: 'model_not_found' }, 'model_key_auth'],
      [400, { message: "Invalid value for 'temperature'", type: 'invalid_request_error', code: 'invalid_value' }, undefined],
      [404, { message: 'The model m does not exist', type: 'invalid_request_error', code: 'model_not_found' }, undefined],
    ];
    for (const [status, error, expected] of cases) {
      answer = { status, body: JSON.stringify({ error }) };
      const err = await failure(chat.complete({ messages: goal('hi') }));
      expect({ status, kind: err.kind, class: classifyModelError(err) }).toEqual({ status, kind: 'bad_request', class: expected });
      expect(isRetryable(err)).toBe(false);
    }
  });

  it('429: a spent quota is model_key_budget, a rate limit is infra_error, whatever the URL says', async () => {
    // The path names a "credit" service: only the server's words may count, not the request's URL.
    const chat = createChatClient({ baseUrl: `${baseUrl}credit-union/`, model: 'm', timeoutMs: 2000 });
    const spent = [
      { message: 'You exceeded your current quota, please check your plan and billing details.', type: 'insufficient_quota', code: 'insufficient_quota' },
      { message: 'Budget has been exceeded! Current cost: 10.2, Max budget: 10.0', type: 'budget_exceeded' },
      { message: 'out of money', code: 'billing_hard_limit_reached' },
    ];
    for (const error of spent) {
      answer = { status: 429, body: JSON.stringify({ error }) };
      const err = await failure(chat.complete({ messages: goal('hi') }));
      expect({ error, class: classifyModelError(err) }).toEqual({ error, class: 'model_key_budget' });
    }
    answer = {
      status: 429,
      body: JSON.stringify({ error: { message: 'Rate limit reached for m on requests per min (RPM): Limit 3, Used 3', type: 'requests', code: 'rate_limit_exceeded' } }),
      headers: { 'retry-after-ms': '20000' },
    };
    const limited = await failure(chat.complete({ messages: goal('hi') }));
    expect(limited).toMatchObject({ kind: 'rate_limited', status: 429, retryAfterMs: 20_000, code: 'rate_limit_exceeded' });
    expect(classifyModelError(limited)).toBe('infra_error');
  });

  it('5xx, timeouts, lost connections and unusable replies are infra_error; what is not a ChatError is unclassified', async () => {
    const chat = createChatClient({ baseUrl, model: 'm', timeoutMs: 300 });
    answer = { status: 503, body: 'overloaded' };
    expect(classifyModelError(await failure(chat.complete({ messages: goal('hi') })))).toBe('infra_error');
    answer = { status: 200, body: JSON.stringify({ choices: [] }) };
    expect(classifyModelError(await failure(chat.complete({ messages: goal('hi') })))).toBe('infra_error');
    answer = { status: 200, body: ok({ role: 'assistant', content: 'x' }), stall: true };
    expect(classifyModelError(await failure(chat.complete({ messages: goal('hi') })))).toBe('infra_error');
    // A port that was just free: nothing listens there any more.
    const gone = createServer();
    await new Promise<void>((resolve) => gone.listen(0, '127.0.0.1', resolve));
    const port = (gone.address() as AddressInfo).port;
    await new Promise<void>((resolve) => gone.close(() => resolve()));
    const lost = await failure(createChatClient({ baseUrl: `http://127.0.0.1:${port}/v1`, model: 'm', timeoutMs: 2000 }).complete({ messages: goal('hi') }));
    expect(lost.kind).toBe('network');
    expect(lost.message).toMatch(/ECONNREFUSED/);
    expect(classifyModelError(lost)).toBe('infra_error');

    expect(classifyModelError(new Error('HTTP 429: quota'))).toBeUndefined();
    expect(classifyModelError(undefined)).toBeUndefined();
  });

  describe('streaming', () => {
    const chunk = (choice: Record<string, unknown> | null, extra: Record<string, unknown> = {}) => ({
      id: 'x',
      object: 'chat.completion.chunk',
      created: 1,
      model: 'real-model-2',
      choices: choice ? [{ index: 0, finish_reason: null, ...choice }] : [],
      ...extra,
    });
    const sse = (...chunks: unknown[]) => `${chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join('')}data: [DONE]\n\n`;
    const streamed = (body: string, extra: Partial<typeof answer> = {}) => ({ status: 200, body, headers: { 'content-type': 'text/event-stream' }, ...extra });
    const usage = { prompt_tokens: 9, completion_tokens: 4, total_tokens: 13 };
    /** An answer in text and two tool calls whose pieces interleave, with the usage last. */
    const pieces = sse(
      chunk({ delta: { role: 'assistant', content: '' } }, { usage: null }),
      chunk({ delta: { content: 'Looking ' } }, { usage: null }),
      chunk({ delta: { content: 'it up.' } }, { usage: null }),
      chunk({ delta: { tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: 'embed', arguments: '' } }] } }, { usage: null }),
      chunk({ delta: { tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'search', arguments: '{"query":' } }] } }, { usage: null }),
      chunk({ delta: { tool_calls: [{ index: 1, function: { arguments: '{"text":"x"}' } }] } }, { usage: null }),
      chunk({ delta: { tool_calls: [{ index: 0, function: { arguments: '"leak"}' } }] } }, { usage: null }),
      chunk({ delta: {}, finish_reason: 'tool_calls' }, { usage: null }),
      chunk(null, { usage }),
    );
    const collect = () => {
      const deltas: string[] = [];
      return { deltas, stream: { onDelta: (delta: string) => void deltas.push(delta) } };
    };

    it('asks for a stream with its usage, hands each piece of content on, and assembles the reply a plain call gives', async () => {
      answer = streamed(pieces);
      const { deltas, stream } = collect();
      const reply = await createChatClient({ baseUrl, model: 'real-model', timeoutMs: 2000 }).complete({ messages: goal('hi'), max_tokens: 7 }, undefined, stream);
      expect(JSON.parse(seen[0].body)).toEqual({ model: 'real-model', messages: goal('hi'), max_tokens: 7, stream: true, stream_options: { include_usage: true } });
      expect(deltas).toEqual(['Looking ', 'it up.']);
      const calls = [
        { id: 'call_a', type: 'function', function: { name: 'search', arguments: '{"query":"leak"}' } },
        { id: 'call_b', type: 'function', function: { name: 'embed', arguments: '{"text":"x"}' } },
      ];
      expect(reply).toEqual({
        content: 'Looking it up.',
        tool_calls: [
          { id: 'call_a', name: 'search', arguments: { query: 'leak' }, raw_arguments: '{"query":"leak"}', malformed: false },
          { id: 'call_b', name: 'embed', arguments: { text: 'x' }, raw_arguments: '{"text":"x"}', malformed: false },
        ],
        finish_reason: 'tool_calls',
        usage,
        model: 'real-model-2',
        message: { role: 'assistant', content: 'Looking it up.', tool_calls: calls },
      });

      // Without a usage chunk (and a server that leaves the index out) the usage is null, as without streaming.
      answer = streamed(sse({ choices: [{ delta: { content: 'ok' } }] }, { choices: [{ delta: {}, finish_reason: 'stop' }] }));
      expect(await createChatClient({ baseUrl, model: 'm', timeoutMs: 2000 }).complete({ messages: goal('hi') }, undefined, collect().stream)).toEqual({
        content: 'ok',
        tool_calls: [],
        finish_reason: 'stop',
        usage: null,
        model: 'm',
        message: { role: 'assistant', content: 'ok' },
      });
    });

    it('a chunk it cannot read, or a stream that ends before its finish reason, is a retryable bad_response', async () => {
      const chat = createChatClient({ baseUrl, model: 'm', timeoutMs: 2000 });
      const bodies: [string, RegExp][] = [
        [sse(chunk({ delta: { content: 5 } })), /chunk 0 of the stream: delta.content is not a string/],
        [sse(chunk({ delta: { tool_calls: [{ id: 'a', function: { name: 'search' } }] } })), /no index/],
        [sse(chunk({ delta: { content: 'cut short' } })), /ended before the finish reason/],
        [sse(chunk({ delta: { tool_calls: [{ index: 0, function: { arguments: '{}' } }] }, finish_reason: 'tool_calls' })), /tool_calls\[0\] lacks an id or a function name/],
        [sse(), /ended without a chunk/],
        // A server that ignores `stream: true` and answers a plain completion.
        [JSON.stringify({ choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }] }), /ended without a chunk/],
      ];
      for (const [body, why] of bodies) {
        answer = streamed(body);
        const err = await failure(chat.complete({ messages: goal('hi') }, undefined, collect().stream));
        expect({ body, kind: err.kind }).toEqual({ body, kind: 'bad_response' });
        expect(err.message).toMatch(why);
        expect(isRetryable(err)).toBe(true);
      }

      // (The SDK logs the event it could not parse on the console before it throws.)
      answer = streamed('data: {"choices": [\n\n');
      const err = await failure(chat.complete({ messages: goal('hi') }, undefined, collect().stream));
      expect(err.kind).toBe('bad_response');
      expect(err.message).toMatch(/chunk 0 of the stream is not JSON/);
    });

    it('failures before the stream are classified as without it; an error in the stream is server_error', async () => {
      const chat = createChatClient({ baseUrl, model: 'm', timeoutMs: 2000 });
      answer = { status: 429, body: JSON.stringify({ error: { message: 'slow down', type: 'requests', code: 'rate_limit_exceeded' } }), headers: { 'retry-after': '3' } };
      expect(await failure(chat.complete({ messages: goal('hi') }, undefined, collect().stream))).toMatchObject({ kind: 'rate_limited', status: 429, retryAfterMs: 3000, code: 'rate_limit_exceeded' });
      answer = { status: 400, body: JSON.stringify({ error: { message: 'bad tool schema', type: 'invalid_request_error' } }) };
      expect(await failure(chat.complete({ messages: goal('hi') }, undefined, collect().stream))).toMatchObject({ kind: 'bad_request', status: 400 });

      // What the real-model server writes when the generation fails after the 200 went out.
      answer = streamed(`data: ${JSON.stringify(chunk({ delta: { content: 'Par' } }))}\n\ndata: ${JSON.stringify({ error: { message: 'the generation failed', type: 'server_error' } })}\n\n`);
      const { deltas, stream } = collect();
      const err = await failure(chat.complete({ messages: goal('hi') }, undefined, stream));
      expect(err).toMatchObject({ kind: 'server_error', type: 'server_error' });
      expect(err.message).toMatch(/the stream ended in an error: the generation failed$/);
      expect(deltas).toEqual(['Par']);
    });

    it('a connection cut mid-stream is network; the timeout and the caller\'s abort cover the whole stream', async () => {
      answer = streamed(pieces, { cut: true });
      const cut = collect();
      const lost = await failure(createChatClient({ baseUrl, model: 'm', timeoutMs: 2000 }).complete({ messages: goal('hi') }, undefined, cut.stream));
      expect(lost.kind).toBe('network');
      expect(cut.deltas).toEqual(['Looking ', 'it up.']);

      answer = streamed(pieces, { stall: true });
      const started = Date.now();
      const stalled = collect();
      const late = await failure(createChatClient({ baseUrl, model: 'm', timeoutMs: 300 }).complete({ messages: goal('hi') }, undefined, stalled.stream));
      expect(late.kind).toBe('timeout');
      expect(stalled.deltas).toEqual(['Looking ', 'it up.']);
      expect(Date.now() - started).toBeLessThan(1500);

      answer = streamed(pieces);
      const controller = new AbortController();
      const reason = new Error('activity cancelled');
      const pending = createChatClient({ baseUrl, model: 'm', timeoutMs: 5000 }).complete({ messages: goal('hi') }, controller.signal, { onDelta: () => controller.abort(reason) });
      await expect(pending).rejects.toBe(reason);
    });

    describe('seen by the span and the metrics', () => {
      afterEach(() => resetTracingForTests());

      it('a streamed call is a span with its usage and counted with its tokens; an onDelta that throws fails the call with its own error', async () => {
        const exporter = new InMemorySpanExporter();
        initTracing('orchestrator', {}, { exporter });
        const metrics = new AgentRunMetrics();
        const chat = createChatClient({ baseUrl, model: 'm', timeoutMs: 2000, metrics });
        answer = streamed(pieces);
        await chat.complete({ messages: goal('hi') }, undefined, collect().stream);

        const broken = new TypeError('the consumer broke');
        const pending = chat.complete({ messages: goal('hi') }, undefined, {
          onDelta: () => {
            throw broken;
          },
        });
        await expect(pending).rejects.toBe(broken);

        await tracingState().spanProcessor!.forceFlush();
        const [ok, failed] = exporter.getFinishedSpans();
        expect(ok.attributes).toMatchObject({ 'gen_ai.usage.input_tokens': 9, 'gen_ai.usage.output_tokens': 4, 'gen_ai.response.model': 'real-model-2', 'gen_ai.response.finish_reasons': ['tool_calls'] });
        expect(failed.attributes['error.type']).toBe('TypeError');
        const text = await metrics.registry.metrics();
        expect(text).toContain('agentrun_model_tokens_total{model="m",direction="input"} 9\n');
        expect(text).toContain('agentrun_model_call_duration_seconds_count{model="m",outcome="ok"} 1\n');
        expect(text).toContain('agentrun_model_call_duration_seconds_count{model="m",outcome="on_delta_error"} 1\n');
      });
    });
  });

  it('reads Retry-After as seconds, an HTTP date, or retry-after-ms', () => {
    expect(retryAfter(new Headers({ 'retry-after': '1' }))).toBe(1000);
    expect(retryAfter(new Headers({ 'retry-after-ms': '250', 'retry-after': '9' }))).toBe(250);
    const inTenSeconds = new Date(Date.now() + 10_000).toUTCString();
    expect(retryAfter(new Headers({ 'retry-after': inTenSeconds }))).toBeGreaterThan(8000);
    expect(retryAfter(new Headers({ 'retry-after': 'soon' }))).toBeUndefined();
    expect(retryAfter(new Headers())).toBeUndefined();
  });
});
