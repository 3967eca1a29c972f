import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ChatError, classifyModelError, createChatClient, isRetryable, retryAfter, type ChatMessage, type ChatReply } from './client';

/** The chat client against plain HTTP servers on 127.0.0.1 that answer what each test sets (the deterministic model server has its own tests in apps/model-server). */


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
  /** `stall`: send the headers and the first half of the body, then nothing until the client gives up. */
  let answer: { status: number; body: string; headers?: Record<string, string>; stall?: boolean };

  beforeEach(async () => {
    seen = [];
    http = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (chunk: string) => (body += chunk));
      req.on('end', () => {
        seen.push({ headers: req.headers, url: req.url, body });
        res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
        if (answer.stall) res.write(answer.body.slice(0, answer.body.length / 2));
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

  it('reads Retry-After as seconds, an HTTP date, or retry-after-ms', () => {
    expect(retryAfter(new Headers({ 'retry-after': '1' }))).toBe(1000);
    expect(retryAfter(new Headers({ 'retry-after-ms': '250', 'retry-after': '9' }))).toBe(250);
    const inTenSeconds = new Date(Date.now() + 10_000).toUTCString();
    expect(retryAfter(new Headers({ 'retry-after': inTenSeconds }))).toBeGreaterThan(8000);
    expect(retryAfter(new Headers({ 'retry-after': 'soon' }))).toBeUndefined();
    expect(retryAfter(new Headers())).toBeUndefined();
  });
});
