import { planLlm } from './agent-run.plan';
import type { ModelReply } from './agent-run.types';
import { applyReply, applyToolResult, cancelPending, startConversation, trimConversation } from './conversation';

const reply = (over: Partial<ModelReply>): ModelReply => ({ key: 'k', content: '', tool_calls: [], finish_reason: 'stop', attempt: 1, duplicate: false, ...over });

describe('the llm policy', () => {
  it('runs the calls the model asked for, one per step, then asks again, then finishes on an answer', () => {
    let c = startConversation('find the bug');
    expect(planLlm({ step: 0, max_steps: 9, conversation: c })).toEqual({ kind: 'llm', prompt: '' });
    c = applyReply(c, reply({ finish_reason: 'tool_calls', tool_calls: [{ id: 'a', name: 'search', arguments: '{"query":"bug"}' }, { id: 'b', name: 'rerank', arguments: '{"query":"bug","k":3}' }] }));
    expect(planLlm({ step: 1, max_steps: 9, conversation: c })).toEqual({ kind: 'tool', tool: 'search', lane: 'cpu', args: { query: 'bug' }, call_id: 'a' });
    c = applyToolResult(c, 'a', 'found it');
    expect(planLlm({ step: 2, max_steps: 9, conversation: c })).toMatchObject({ kind: 'tool', tool: 'rerank', lane: 'gpu', args: { query: 'bug', k: 3 } });
    c = applyToolResult(c, 'b', 'ranked');
    expect(planLlm({ step: 3, max_steps: 9, conversation: c }).kind).toBe('llm');
    c = applyReply(c, reply({ content: 'the bug is in the parser' }));
    expect(planLlm({ step: 4, max_steps: 9, conversation: c })).toEqual({ kind: 'finish' });
    expect(c.answer).toBe('the bug is in the parser');
    expect(c.messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool', 'tool', 'assistant']);
  });

  it('answers malformed arguments and unknown tools with an error the model can read, running nothing', () => {
    const c = applyReply(startConversation('g'), reply({ finish_reason: 'tool_calls', tool_calls: [
      { id: 'a', name: 'search', arguments: '{"query": "x"' },
      { id: 'b', name: 'teleport', arguments: '{}' },
      { id: 'c', name: 'embed', arguments: '[1]' },
    ] }));
    expect(c.pending).toEqual([]);
    expect(c.messages.slice(-3).map((m) => [m.tool_call_id, m.content?.slice(0, 30)])).toEqual([
      ['a', 'error: the arguments are not v'],
      ['b', 'error: there is no tool named '],
      ['c', 'error: the arguments must be a'],
    ]);
    expect(planLlm({ step: 1, max_steps: 9, conversation: c }).kind).toBe('llm');
  });

  it('asks the model to continue after a reply cut short by the token limit', () => {
    const c = applyReply(startConversation('g'), reply({ content: 'the answer is', finish_reason: 'length' }));
    expect(c.answer).toBeUndefined();
    expect(c.messages[c.messages.length - 1]).toEqual({ role: 'user', content: 'continue' });
    expect(c.truncated).toBe(1);
  });

  it('a cancel answers every waiting call, so the conversation stays valid for a fork', () => {
    const c = cancelPending(applyReply(startConversation('g'), reply({ finish_reason: 'tool_calls', tool_calls: [{ id: 'a', name: 'search', arguments: '{"query":"q"}' }] })));
    expect(c.pending).toEqual([]);
    expect(c.messages[c.messages.length - 1]).toEqual({ role: 'tool', tool_call_id: 'a', content: 'cancelled' });
  });

  it('trimming keeps the system prompt and the goal and never starts on a tool result', () => {
    let c = startConversation('goal');
    for (let i = 0; i < 40; i++) {
      c = applyReply(c, reply({ finish_reason: 'tool_calls', tool_calls: [{ id: `t${i}`, name: 'search', arguments: '{"query":"q"}' }] }));
      c = applyToolResult(c, `t${i}`, 'r');
    }
    const trimmed = trimConversation(c);
    expect(trimmed.messages.length).toBeLessThanOrEqual(60);
    expect(trimmed.messages.slice(0, 2)).toEqual(c.messages.slice(0, 2));
    expect(trimmed.messages[2].role).toBe('assistant');
  });
});
