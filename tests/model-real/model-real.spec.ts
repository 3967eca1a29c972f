/**
 * The real-model server with SmolLM2-135M-Instruct on the CPU, as a process on a free port: real answers,
 * usage counted by the model's tokenizer, streaming, the errors, the queue bound and SIGTERM.
 *
 *   npm run test:model-real      (fetches the model and node-llama-cpp first if missing, builds, runs this)
 */
import { createChatClient } from '@agentrun/activities';
import { includes } from '@agentrun/evals';
import { textOfStream } from '../../apps/model-server/src/real/protocol';
import { postChat, REAL_MODEL, startRealModel, type ChatCompletion, type RealModelProcess } from '../support/model-real';

jest.setTimeout(180_000);

const SYSTEM = { role: 'system', content: 'You are a helpful assistant.' };
const ask = (question: string, extra: Record<string, unknown> = {}) => ({ model: REAL_MODEL, messages: [SYSTEM, { role: 'user', content: question }], ...extra });

describe('the real-model server (SmolLM2-135M-Instruct)', () => {
  let server: RealModelProcess;

  beforeAll(async () => {
    server = await startRealModel({ MODEL_REAL_QUEUE: '1' });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("answers 'What is the capital of France?' with Paris, and counts the tokens", async () => {
    const res = await postChat(server.url, ask('What is the capital of France?'));
    expect(res.status).toBe(200);
    const reply = res.json();
    expect(reply).toMatchObject({ object: 'chat.completion', model: REAL_MODEL, choices: [{ index: 0, message: { role: 'assistant' }, finish_reason: 'stop' }] });
    expect(reply.choices[0].message.content).toContain('Paris');
    const { prompt_tokens, completion_tokens, total_tokens } = reply.usage;
    expect(prompt_tokens).toBeGreaterThan(10);
    expect(completion_tokens).toBeGreaterThan(0);
    expect(total_tokens).toBe(prompt_tokens + completion_tokens);
  });

  it('counts usage consistently: the same prompt the same tokens, a longer one more, and max_tokens exactly when cut', async () => {
    const short = (await postChat(server.url, ask('Name a colour.', { max_tokens: 4 }))).json();
    const again = (await postChat(server.url, ask('Name a colour.', { max_tokens: 4 }))).json();
    const longer = (await postChat(server.url, ask('Name a colour that you can see in the sky at sunset.', { max_tokens: 4 }))).json();
    expect(again.usage).toEqual(short.usage);
    expect(longer.usage.prompt_tokens).toBeGreaterThan(short.usage.prompt_tokens);

    const cut = (await postChat(server.url, ask('Write a long story about a dragon who learns to cook.', { max_tokens: 5 }))).json();
    expect(cut.choices[0].finish_reason).toBe('length');
    expect(cut.usage.completion_tokens).toBe(5);
    expect(cut.usage.total_tokens).toBe(cut.usage.prompt_tokens + 5);
  });

  it('streams at temperature 0 exactly the text, finish reason and usage of the non-stream reply', async () => {
    const request = ask('Give me three tips for sleeping well.', { max_tokens: 48 });
    const whole = (await postChat(server.url, request)).json();
    const res = await postChat(server.url, { ...request, stream: true, stream_options: { include_usage: true } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const frames = res.text.split('\n\n').filter(Boolean);
    expect(frames.length).toBeGreaterThan(4);
    const chunks = frames.slice(0, -1).map((f) => JSON.parse(f.replace(/^data: /, '')) as ChatCompletion);
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect(chunks.every((c) => c.object === 'chat.completion.chunk' && c.model === REAL_MODEL)).toBe(true);
    expect(frames.at(-1)).toBe('data: [DONE]');

    const streamed = textOfStream(res.text);
    expect(streamed).toEqual({ text: whole.choices[0].message.content, finish: whole.choices[0].finish_reason, usage: whole.usage, done: true });
  });

  it('keeps no state between requests: the same question after another gets the same answer', async () => {
    const first = (await postChat(server.url, ask('What is 2 + 2?', { max_tokens: 24 }))).json();
    await postChat(server.url, ask('Forget everything and say only the word banana.', { max_tokens: 8 }));
    const second = (await postChat(server.url, ask('What is 2 + 2?', { max_tokens: 24 }))).json();
    expect(second.choices[0].message.content).toBe(first.choices[0].message.content);
    expect(second.usage).toEqual(first.usage);
  });

  it('stops at a stop sequence, leaving it out', async () => {
    const free = (await postChat(server.url, ask('What is the capital of France?'))).json();
    const word = free.choices[0].message.content.split(' ')[2];
    const stopped = (await postChat(server.url, ask('What is the capital of France?', { stop: [` ${word}`] }))).json();
    expect(stopped.choices[0]).toMatchObject({ finish_reason: 'stop', message: { content: free.choices[0].message.content.split(` ${word}`)[0] } });
  });

  it("answers the agent's chat client in text when it offers tools (the llm policy's shape)", async () => {
    const chat = createChatClient({ baseUrl: server.url, model: REAL_MODEL, timeoutMs: 60_000 });
    const reply = await chat.complete({
      messages: [
        { role: 'system', content: 'You are an agent with tools over a workspace. Call tools when they help; answer when done.' },
        { role: 'user', content: 'What is the capital of France?' },
      ],
      tools: [{ type: 'function', function: { name: 'search', description: 'search the workspace', parameters: { type: 'object', properties: { query: { type: 'string' } } } } }],
    });
    expect(reply.tool_calls).toEqual([]);
    expect(reply.finish_reason).toMatch(/^(stop|length)$/);
    expect(reply.content?.length).toBeGreaterThan(0);
    expect(reply.usage?.total_tokens).toBe((reply.usage?.prompt_tokens ?? 0) + (reply.usage?.completion_tokens ?? 0));
  });

  it('refuses a bad body with an OpenAI-style 400, and a body over 1 MiB with 413', async () => {
    const notJson = await postChat(server.url, '{"model": ');
    expect(notJson.status).toBe(400);
    expect(notJson.json().error).toEqual({ message: 'the request body is not valid JSON', type: 'invalid_request_error', param: null, code: null });

    const noMessages = await postChat(server.url, { model: REAL_MODEL });
    expect(noMessages.status).toBe(400);
    expect(noMessages.json().error).toMatchObject({ type: 'invalid_request_error', param: 'messages' });

    const otherModel = await postChat(server.url, { ...ask('hi'), model: 'gpt-4o' });
    expect(otherModel.status).toBe(400);
    expect(otherModel.json().error).toMatchObject({ code: 'model_not_found' });

    const huge = await postChat(server.url, ask('x'.repeat(1024 * 1024 + 1)));
    expect(huge.status).toBe(413);
  });

  it('turns a request away with 503 and Retry-After when the queue is full', async () => {
    // MODEL_REAL_QUEUE=1: one answer running and one waiting; a third at the same moment does not fit.
    const long = ask('Write a long story about a dragon who learns to cook.', { max_tokens: 64 });
    const replies = await Promise.all([postChat(server.url, long), postChat(server.url, long), postChat(server.url, long)]);
    expect(replies.map((r) => r.status).sort()).toEqual([200, 200, 503]);
    const busy = replies.find((r) => r.status === 503)!;
    expect(Number(busy.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(busy.json().error).toMatchObject({ type: 'server_error', code: 'queue_full' });
  });

  it('a smoke eval: short factual questions scored with includes', async () => {
    const cases = [
      { input: 'What is the capital of France?', target: 'Paris' },
      { input: 'What is the capital of Japan?', target: 'Tokyo' },
      { input: 'What is the largest planet in our solar system?', target: 'Jupiter' },
      { input: 'What colour is the sky on a clear day?', target: 'blue' },
      { input: 'How many days are there in a week?', target: ['7', 'seven'] },
      { input: 'Who wrote Romeo and Juliet?', target: 'Shakespeare' },
    ];
    const scores: number[] = [];
    for (const c of cases) {
      const reply = (await postChat(server.url, ask(c.input, { max_tokens: 48 }))).json();
      scores.push(includes(reply.choices[0].message.content, c.target).value);
    }
    const score = scores.reduce((a, b) => a + b, 0);
    console.log(`smoke eval against ${REAL_MODEL}: ${score}/${cases.length} (${scores.join(' ')})`);
    expect(score).toBeGreaterThanOrEqual(4);
  });

  it('exits 0 on SIGTERM', async () => {
    expect(await server.stop()).toBe(0);
    expect(server.output()).toMatch(/SIGTERM, closing after \d+ completions/);
  });
});
