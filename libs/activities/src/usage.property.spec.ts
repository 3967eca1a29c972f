import { costOf, type ModelPrices } from '@agentrun/config';
import * as fc from 'fast-check';
import type { ParsedToolCall } from './llm';
import { estimateTokens, usageOf, worstCaseOf } from './usage';

const price = fc.record({ input_usd_per_million: fc.integer({ min: 0, max: 100_000 }).map((n) => n / 100), output_usd_per_million: fc.integer({ min: 0, max: 100_000 }).map((n) => n / 100) });
const models = fc.constantFrom('small', 'big', 'alias');
/** A price table: some of the models, perhaps `*`. */
const pricesArb: fc.Arbitrary<ModelPrices> = fc.record({ small: price, big: price, '*': price }, { requiredKeys: [] });
const message = fc.record({ role: fc.constantFrom('system', 'user', 'assistant', 'tool'), content: fc.option(fc.string({ unit: 'binary', maxLength: 200 }), { nil: null }) });
const toolCall: fc.Arbitrary<ParsedToolCall> = fc.record({
  id: fc.string({ maxLength: 8 }),
  name: fc.string({ minLength: 1, maxLength: 12 }),
  arguments: fc.constant({}),
  raw_arguments: fc.string({ maxLength: 80 }),
  malformed: fc.constant(false as const),
});

describe("a model call's worst case and its usage (properties)", () => {
  it('the worst case is the estimated prompt plus max_tokens, at a cost that never falls as max_tokens grows', () => {
    fc.assert(
      fc.property(fc.array(message, { maxLength: 5 }), models, pricesArb, fc.integer({ min: 1, max: 100_000 }), fc.integer({ min: 0, max: 100_000 }), (messages, model, prices, maxTokens, more) => {
        const worst = worstCaseOf(messages, model, prices, maxTokens);
        const text = messages.map((m) => m.content ?? '').join('');
        expect(worst.tokens).toBe(estimateTokens(text) + maxTokens);
        expect(worst.usd).toBeGreaterThanOrEqual(0);
        const bigger = worstCaseOf(messages, model, prices, maxTokens + more);
        expect(bigger.tokens).toBeGreaterThanOrEqual(worst.tokens);
        expect(bigger.usd).toBeGreaterThanOrEqual(worst.usd);
      }),
    );
  });

  it("covers the call: a reply without server usage, within max_tokens, priced as the request was, never uses more tokens or dollars than was reserved", () => {
    fc.assert(
      fc.property(
        fc.array(message, { maxLength: 5 }),
        models,
        pricesArb,
        fc.integer({ min: 1, max: 2_000 }),
        fc.option(fc.string({ unit: 'binary', maxLength: 400 }), { nil: null }),
        fc.array(toolCall, { maxLength: 2 }),
        (messages, model, prices, maxTokens, content, tool_calls) => {
          const reply = { usage: null, model, content, tool_calls };
          const usage = usageOf({ messages }, reply, model, prices);
          fc.pre(usage.completion_tokens <= maxTokens);
          const worst = worstCaseOf(messages, model, prices, maxTokens);
          expect(usage.prompt_tokens + usage.completion_tokens).toBeLessThanOrEqual(worst.tokens);
          expect(usage.cost_usd).toBeLessThanOrEqual(worst.usd);
          expect(usage.estimated).toBe(true);
        },
      ),
    );
  });

  it('estimates and costs are never negative and never fall as the text or the tokens grow; a token estimate of two texts is at most the sum of theirs', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 300 }), fc.string({ unit: 'binary', maxLength: 300 }), price, fc.nat(1e7), fc.nat(1e7), fc.nat(1e4), (a, b, p, prompt, completion, more) => {
        expect(estimateTokens(a)).toBeGreaterThanOrEqual(a.length > 0 ? 1 : 0);
        expect(estimateTokens(a + b)).toBeGreaterThanOrEqual(estimateTokens(a));
        expect(estimateTokens(a + b)).toBeLessThanOrEqual(estimateTokens(a) + estimateTokens(b));
        const cost = costOf(p, prompt, completion);
        expect(cost).toBeGreaterThanOrEqual(0);
        expect(costOf(p, prompt + more, completion)).toBeGreaterThanOrEqual(cost);
        expect(costOf(p, prompt, completion + more)).toBeGreaterThanOrEqual(cost);
        // To the ledger's precision: whole hundred-millionths of a dollar.
        expect(Math.round(cost * 1e8) / 1e8).toBe(cost);
      }),
    );
  });
});
