import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ChatError, createChatClient, isRetryable, retryAfter, type ChatMessage, type ChatReply } from './client';

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
  let answer: { status: number; body: string; headers?: Record<string, string> };

  beforeEach(async () => {
    seen = [];
    http = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (chunk: string) => (body += chunk));
      req.on('end', () => {
        seen.push({ headers: req.headers, url: req.url, body });
        res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
        res.end(answer.body);
      });
    });
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(http.address() as AddressInfo).port}/v1/`;
  });
  afterEach(() => new Promise<void>((resolve) => http.close(() => resolve())));

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

  it('reads Retry-After as seconds, an HTTP date, or retry-after-ms', () => {
    expect(retryAfter(new Headers({ 'retry-after': '1' }))).toBe(1000);
    expect(retryAfter(new Headers({ 'retry-after-ms': '250', 'retry-after': '9' }))).toBe(250);
    const inTenSeconds = new Date(Date.now() + 10_000).toUTCString();
    expect(retryAfter(new Headers({ 'retry-after': inTenSeconds }))).toBeGreaterThan(8000);
    expect(retryAfter(new Headers({ 'retry-after': 'soon' }))).toBeUndefined();
    expect(retryAfter(new Headers())).toBeUndefined();
  });
});
