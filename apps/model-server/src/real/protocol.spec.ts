import { chatHistoryOf, completionBody, finishReasonOf, isProblem, parseCompletionRequest, streamFrames, textOfStream, usageOf, type CompletionRequest, type RequestProblem } from './protocol';

const limits = { model: 'smollm2-135m-instruct', defaultMaxTokens: 128, maxTokensCap: 8192 };
const user = (content: unknown) => ({ role: 'user', content });
const body = (extra: Record<string, unknown> = {}) => ({ model: limits.model, messages: [user('What is the capital of France?')], ...extra });

function accepted(raw: unknown): CompletionRequest {
  const parsed = parseCompletionRequest(raw, limits);
  if (isProblem(parsed)) throw new Error(`refused: ${parsed.message}`);
  return parsed;
}

function refused(raw: unknown): RequestProblem {
  const parsed = parseCompletionRequest(raw, limits);
  if (!isProblem(parsed)) throw new Error(`accepted: ${JSON.stringify(parsed)}`);
  return parsed;
}

describe('reading a chat-completion request', () => {
  it('defaults to greedy decoding, 128 tokens, no stop sequences and no stream', () => {
    expect(accepted(body())).toEqual({
      model: limits.model,
      turns: [{ role: 'user', text: 'What is the capital of France?' }],
      maxTokens: 128,
      temperature: 0,
      stop: [],
      stream: false,
      includeUsage: false,
    });
  });

  it('takes the sampling settings, a stop string or list, and stream options', () => {
    expect(accepted(body({ max_tokens: 5, temperature: 0.7, top_p: 0.9, seed: 42, stop: 'END', stream: true, stream_options: { include_usage: true } }))).toMatchObject({
      maxTokens: 5,
      temperature: 0.7,
      topP: 0.9,
      seed: 42,
      stop: ['END'],
      stream: true,
      includeUsage: true,
    });
    expect(accepted(body({ stop: ['a', 'b'], max_completion_tokens: 9 }))).toMatchObject({ stop: ['a', 'b'], maxTokens: 9 });
  });

  it('turns developer messages into system turns, tool results into user turns and earlier tool calls into text', () => {
    const request = accepted(
      body({
        messages: [
          { role: 'developer', content: 'Be brief.' },
          user([{ type: 'text', text: 'find it' }, { type: 'text', text: 'now' }]),
          { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'search', arguments: '{"query":"it"}' } }] },
          { role: 'tool', tool_call_id: 'c1', content: 'found: it.txt' },
        ],
        tools: [{ type: 'function', function: { name: 'search' } }],
        tool_choice: 'auto',
      }),
    );
    expect(request.turns).toEqual([
      { role: 'system', text: 'Be brief.' },
      { role: 'user', text: 'find it\nnow' },
      { role: 'assistant', text: 'Called search (call c1) with {"query":"it"}' },
      { role: 'user', text: 'Result of tool call c1:\nfound: it.txt' },
    ]);
  });

  it.each([
    ['not an object', [1], null, 'the request body must be a JSON object'],
    ['no model', { messages: [user('x')] }, 'model', "'model' must be a non-empty string"],
    ['another model', body({ model: 'gpt-4o' }), 'model', "the model 'gpt-4o' does not exist; this server answers to 'smollm2-135m-instruct'"],
    ['no messages', body({ messages: [] }), 'messages', "'messages' must be a non-empty array"],
    ['an unknown role', body({ messages: [{ role: 'robot', content: 'x' }] }), 'messages[0].role', 'messages[0].role must be one of system, developer, user, assistant, tool'],
    ['content of the wrong type', body({ messages: [user(7)] }), 'messages[0].content', 'messages[0].content must be a string, null or an array of text parts'],
    ['an image part', body({ messages: [user([{ type: 'image_url', image_url: { url: 'x' } }])] }), 'messages[0].content', 'messages[0].content must be a string, null or an array of text parts'],
    ['a tool result without its call id', body({ messages: [{ role: 'tool', content: 'x' }] }), 'messages[0].tool_call_id', 'messages[0].tool_call_id must be a non-empty string'],
    ['max_tokens of 0', body({ max_tokens: 0 }), 'max_tokens', "'max_tokens' must be a positive integer"],
    ['max_tokens past the context', body({ max_tokens: 9000 }), 'max_tokens', "'max_tokens' is 9000; the model's context holds 8192 tokens"],
    ['two different limits', body({ max_tokens: 5, max_completion_tokens: 6 }), 'max_tokens', "'max_tokens' and 'max_completion_tokens' disagree; give one"],
    ['a temperature above 2', body({ temperature: 2.5 }), 'temperature', "'temperature' must be a number from 0 to 2"],
    ['a fractional seed', body({ seed: 1.5 }), 'seed', "'seed' must be an integer"],
    ['five stop sequences', body({ stop: ['a', 'b', 'c', 'd', 'e'] }), 'stop', "'stop' must be a non-empty string or an array of at most 4 of them"],
    ['two choices', body({ n: 2 }), 'n', "this server makes one choice per request: 'n' must be 1"],
    ['a required tool call', body({ tools: [], tool_choice: 'required' }), 'tool_choice', "this server answers in text and calls no tools: 'tool_choice' may be 'auto' or 'none' only"],
    ['JSON mode', body({ response_format: { type: 'json_object' } }), 'response_format', "this server writes plain text only: 'response_format' must be { type: 'text' }"],
    ['stream given as a string', body({ stream: 'yes' }), 'stream', "'stream' must be a boolean"],
    ['stream options without a stream', body({ stream_options: { include_usage: true } }), 'stream_options', "'stream_options' is only allowed with 'stream: true'"],
  ])('refuses %s, naming the parameter', (_what, raw, param, message) => {
    expect(refused(raw)).toMatchObject({ param, message });
  });

  it('says model_not_found for another model, as OpenAI does', () => {
    expect(refused(body({ model: 'other' })).code).toBe('model_not_found');
  });
});

describe("the conversation as the model's chat history", () => {
  it("ends in an empty model turn for the model to write after a user turn", () => {
    expect(chatHistoryOf([{ role: 'system', text: 's' }, { role: 'user', text: 'u' }])).toEqual([
      { type: 'system', text: 's' },
      { type: 'user', text: 'u' },
      { type: 'model', response: [] },
    ]);
  });

  it('lets the model continue a last assistant turn (a prefill) instead of opening a new one', () => {
    expect(chatHistoryOf([{ role: 'user', text: 'u' }, { role: 'assistant', text: 'The answer is' }])).toEqual([
      { type: 'user', text: 'u' },
      { type: 'model', response: ['The answer is'] },
    ]);
  });
});

describe('finish reasons and usage', () => {
  it('is length only when max_tokens ran out', () => {
    expect(finishReasonOf('maxTokens')).toBe('length');
    expect(finishReasonOf('eogToken')).toBe('stop');
    expect(finishReasonOf('customStopTrigger')).toBe('stop');
    expect(finishReasonOf('stopGenerationTrigger')).toBe('stop');
  });

  it('totals prompt and completion tokens', () => {
    expect(usageOf(27, 7)).toEqual({ prompt_tokens: 27, completion_tokens: 7, total_tokens: 34 });
  });

  it('writes a non-stream completion in the OpenAI shape', () => {
    expect(completionBody({ id: 'chatcmpl-1', created: 5, model: 'm' }, 'Paris.', 'stop', usageOf(3, 2))).toEqual({
      id: 'chatcmpl-1',
      object: 'chat.completion',
      created: 5,
      model: 'm',
      choices: [{ index: 0, message: { role: 'assistant', content: 'Paris.' }, finish_reason: 'stop', logprobs: null }],
      usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
    });
  });
});

describe('server-sent event framing', () => {
  const meta = { id: 'chatcmpl-9', created: 7, model: 'm' };
  const data = (frame: string) => {
    expect(frame).toMatch(/^data: [^\n]*\n\n$/);
    return JSON.parse(frame.slice('data: '.length)) as Record<string, unknown>;
  };

  it('opens with the assistant role, one chunk per piece, then the finish reason and [DONE]', () => {
    const frames = streamFrames(meta, false);
    expect(data(frames.first())).toEqual({ id: 'chatcmpl-9', object: 'chat.completion.chunk', created: 7, model: 'm', choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null, logprobs: null }] });
    expect(data(frames.text('line one\nline two'))).toMatchObject({ choices: [{ delta: { content: 'line one\nline two' }, finish_reason: null }] });
    expect(data(frames.finish('length'))).toMatchObject({ choices: [{ delta: {}, finish_reason: 'length' }] });
    expect(frames.done()).toBe('data: [DONE]\n\n');
  });

  it('with include_usage: usage null on every chunk, then a last chunk with no choices and the usage', () => {
    const frames = streamFrames(meta, true);
    expect(data(frames.text('x'))).toMatchObject({ usage: null });
    expect(data(frames.usage(usageOf(4, 1)))).toEqual({ id: 'chatcmpl-9', object: 'chat.completion.chunk', created: 7, model: 'm', choices: [], usage: { prompt_tokens: 4, completion_tokens: 1, total_tokens: 5 } });
  });

  it('assembles back into the text, finish reason and usage it was made from', () => {
    const frames = streamFrames(meta, true);
    const stream = frames.first() + ['The', ' capital', '\n\nis', ' Paris.'].map(frames.text).join('') + frames.finish('stop') + frames.usage(usageOf(27, 7)) + frames.done();
    expect(textOfStream(stream)).toEqual({ text: 'The capital\n\nis Paris.', finish: 'stop', usage: { prompt_tokens: 27, completion_tokens: 7, total_tokens: 34 }, done: true });
    expect(textOfStream(frames.first() + frames.text('cut'))).toMatchObject({ text: 'cut', finish: null, done: false });
  });
});
