import { parseModelPrices } from '@agentrun/config';
import { estimateTokens, usageOf } from './usage';

const prices = parseModelPrices(JSON.stringify({ small: { input_usd_per_million: 2, output_usd_per_million: 8 }, '*': { input_usd_per_million: 1, output_usd_per_million: 1 } }));
const reply = (usage: { prompt_tokens: number; completion_tokens: number } | null, model = 'small') => ({
  usage: usage && { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
  model,
  content: 'twelve chars',
  tool_calls: [],
});
const call = { messages: [{ role: 'system', content: 'abcd' }, { role: 'user', content: 'efghij' }] };

describe('usageOf (a model call\'s tokens and cost)', () => {
  it("takes the server's usage and prices it at the requested model's price", () => {
    expect(usageOf(call, reply({ prompt_tokens: 1_000, completion_tokens: 250 }), 'small', prices)).toEqual({
      model: 'small',
      prompt_tokens: 1_000,
      completion_tokens: 250,
      cost_usd: 0.004,
      priced: true,
    });
  });

  it('estimates the tokens from the texts when the server reports none, and says so', () => {
    expect(usageOf(call, reply(null), 'small', prices)).toEqual({ model: 'small', prompt_tokens: 3, completion_tokens: 3, cost_usd: 0.00003, priced: true, estimated: true });
    expect(estimateTokens('')).toBe(0);
    expect(estimateTokens('a')).toBe(1);
  });

  it("falls back to the answering model's price, then '*'; with no price the call costs 0, unpriced", () => {
    expect(usageOf(call, reply({ prompt_tokens: 1_000_000, completion_tokens: 0 }, 'small'), 'alias', prices).cost_usd).toBe(2);
    expect(usageOf(call, reply({ prompt_tokens: 1_000_000, completion_tokens: 0 }, 'big'), 'big', prices).cost_usd).toBe(1);
    expect(usageOf(call, reply({ prompt_tokens: 10, completion_tokens: 10 }, 'big'), 'big', {})).toMatchObject({ cost_usd: 0, priced: false });
  });
});
