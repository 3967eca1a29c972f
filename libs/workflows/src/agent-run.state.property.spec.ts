import type { ModelCallUsage } from '@agentrun/contracts';
import * as fc from 'fast-check';
import { addUsage } from './agent-run.state';

/** One call's usage as usageOf reports it: whole tokens, dollars to the hundred-millionth. */
const call: fc.Arbitrary<ModelCallUsage> = fc.record(
  {
    model: fc.constantFrom('small', 'big'),
    prompt_tokens: fc.nat(1_000_000),
    completion_tokens: fc.nat(100_000),
    cost_usd: fc.integer({ min: 0, max: 1e9 }).map((n) => n / 1e8),
    priced: fc.boolean(),
    estimated: fc.boolean(),
  },
  { requiredKeys: ['model', 'prompt_tokens', 'completion_tokens', 'cost_usd', 'priced'] },
);

describe("a run's usage, added up call by call (properties)", () => {
  it('the totals are the sums of the calls, in any order, and never fall as calls are added', () => {
    fc.assert(
      fc.property(fc.array(call, { minLength: 1, maxLength: 40 }), fc.nat(), (calls, shift) => {
        const steps: ReturnType<typeof addUsage>[] = [];
        for (const c of calls) steps.push(addUsage(steps[steps.length - 1], c));
        const total = steps[steps.length - 1];
        const sum = (pick: (c: ModelCallUsage) => number) => calls.reduce((n, c) => n + pick(c), 0);
        expect(total).toMatchObject({ calls: calls.length, prompt_tokens: sum((c) => c.prompt_tokens), completion_tokens: sum((c) => c.completion_tokens), estimated_calls: calls.filter((c) => c.estimated).length });
        // Dollars to the hundred-millionth, as each call's: the total is the exact sum of the calls' whole hundred-millionths.
        expect(Math.round(total.cost_usd * 1e8)).toBe(sum((c) => Math.round(c.cost_usd * 1e8)));
        for (let i = 1; i < steps.length; i++) {
          for (const key of ['calls', 'prompt_tokens', 'completion_tokens', 'cost_usd', 'estimated_calls'] as const) expect(steps[i][key]).toBeGreaterThanOrEqual(steps[i - 1][key]);
        }
        // Another order (a rotation and a reversal) gives the same totals, to the last digit.
        const rotated = [...calls.slice(shift % calls.length), ...calls.slice(0, shift % calls.length)].reverse();
        expect(rotated.reduce<ReturnType<typeof addUsage> | undefined>((t, c) => addUsage(t, c), undefined)).toEqual(total);
      }),
    );
  });
});
