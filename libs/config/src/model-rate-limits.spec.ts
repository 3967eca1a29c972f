import { DEFAULT_TIER_WEIGHTS, parseModelRateLimits, parseTierWeights, rateLimitOf, WEIGHTED_TIERS } from './model-rate-limits';

describe('AGENTRUN_MODEL_RATE_LIMITS', () => {
  it('reads limits by model, either or both per minute, and * for the rest', () => {
    const limits = parseModelRateLimits('{"gpt-4o": {"requests_per_minute": 500, "tokens_per_minute": 90000}, "*": {"tokens_per_minute": 1000}}');
    expect(rateLimitOf(limits, 'gpt-4o')).toEqual({ requests_per_minute: 500, tokens_per_minute: 90_000 });
    expect(rateLimitOf(limits, 'other')).toEqual({ tokens_per_minute: 1_000 });
    expect(rateLimitOf(parseModelRateLimits(''), 'gpt-4o')).toBeUndefined();
    expect(rateLimitOf(parseModelRateLimits(undefined), 'gpt-4o')).toBeUndefined();
  });

  it.each([
    ['not json', /is not JSON/],
    ['[]', /must be a JSON object/],
    ['{"m": {}}', /names no limit/],
    ['{"m": {"rpm": 3}}', /takes requests_per_minute and tokens_per_minute, not "rpm"/],
    ['{"m": {"tokens_per_minute": 0}}', /tokens_per_minute must be a whole number >= 1, got 0/],
    ['{"m": {"requests_per_minute": 1.5}}', /requests_per_minute must be a whole number/],
    ['{"bad name!": {"requests_per_minute": 1}}', /is not a model name/],
  ])('refuses %s, naming the setting', (text, why) => {
    expect(() => parseModelRateLimits(text)).toThrow(why);
    expect(() => parseModelRateLimits(text)).toThrow(/AGENTRUN_MODEL_RATE_LIMITS/);
  });
});

describe('AGENTRUN_TIER_WEIGHTS', () => {
  it('defaults to enterprise 4, team 2, batch 1, and reads every tier given', () => {
    expect(parseTierWeights(undefined, WEIGHTED_TIERS)).toBe(DEFAULT_TIER_WEIGHTS);
    expect(parseTierWeights('{"enterprise": 10, "team": 3, "batch": 0.5}', WEIGHTED_TIERS)).toEqual({ enterprise: 10, team: 3, batch: 0.5 });
  });

  it('refuses an unknown or missing tier and a weight that is not > 0', () => {
    expect(() => parseTierWeights('{"gold": 1, "enterprise": 4, "team": 2, "batch": 1}', WEIGHTED_TIERS)).toThrow(/unknown tier "gold"/);
    expect(() => parseTierWeights('{"enterprise": 4, "team": 2}', WEIGHTED_TIERS)).toThrow(/AGENTRUN_TIER_WEIGHTS.batch must be a number > 0/);
    expect(() => parseTierWeights('{"enterprise": 0, "team": 2, "batch": 1}', WEIGHTED_TIERS)).toThrow(/enterprise must be a number > 0/);
  });
});
