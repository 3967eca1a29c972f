import { ConfigError, loadConfig } from './env';
import { costOf, modelPricesSpec, parseModelPrices, priceOf } from './model-prices';

describe('AGENTRUN_MODEL_PRICES', () => {
  it('is no prices when unset or empty', () => {
    for (const text of [undefined, '', '  ']) expect(parseModelPrices(text)).toEqual({});
  });

  it("prices a model by its own entry, else by '*', else not at all", () => {
    const prices = parseModelPrices(JSON.stringify({ 'gpt-4o-mini': { input_usd_per_million: 0.15, output_usd_per_million: 0.6 }, '*': { input_usd_per_million: 1, output_usd_per_million: 2 } }));
    expect(priceOf(prices, 'gpt-4o-mini')).toEqual({ input_usd_per_million: 0.15, output_usd_per_million: 0.6 });
    expect(priceOf(prices, 'other')).toEqual({ input_usd_per_million: 1, output_usd_per_million: 2 });
    // Not inherited from Object.prototype.
    expect(priceOf(parseModelPrices('{"a": {"input_usd_per_million": 1, "output_usd_per_million": 1}}'), 'constructor')).toBeUndefined();
  });

  it('costs tokens at the per-million prices, to a millionth of a cent', () => {
    const price = { input_usd_per_million: 0.15, output_usd_per_million: 0.6 };
    expect(costOf(price, 1_000_000, 0)).toBe(0.15);
    expect(costOf(price, 1_000, 500)).toBe(0.00045);
    expect(costOf(price, 1, 1)).toBe(0.00000075);
    expect(costOf({ input_usd_per_million: 0, output_usd_per_million: 0 }, 10_000, 10_000)).toBe(0);
  });

  it.each([
    ['{', /is not JSON/],
    ['[]', /must be a JSON object of prices by model/],
    ['{"m": 3}', /AGENTRUN_MODEL_PRICES\.m must be an object with input_usd_per_million and output_usd_per_million/],
    ['{"m": {"input_usd_per_million": 1}}', /AGENTRUN_MODEL_PRICES\.m\.output_usd_per_million must be a number of US dollars >= 0, got undefined/],
    ['{"m": {"input_usd_per_million": -1, "output_usd_per_million": 1}}', /input_usd_per_million must be a number of US dollars >= 0, got -1/],
    ['{"m": {"input_usd_per_million": "1", "output_usd_per_million": 1}}', /got "1"/],
    ['{"m": {"input_usd_per_million": 1, "output_usd_per_million": 1, "cached": 1}}', /takes input_usd_per_million and output_usd_per_million, not "cached"/],
    ['{" m": {"input_usd_per_million": 1, "output_usd_per_million": 1}}', /' m' is not a model name/],
  ])('refuses %s at start, naming the setting', (text, message) => {
    expect(() => parseModelPrices(text)).toThrow(message);
    let caught: unknown;
    try {
      loadConfig(modelPricesSpec, { AGENTRUN_MODEL_PRICES: text });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ConfigError);
  });
});
