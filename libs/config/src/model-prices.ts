import type { Setting } from './env';

/** What one model costs: US dollars per million prompt (input) and completion (output) tokens. */
export interface ModelPrice {
  input_usd_per_million: number;
  output_usd_per_million: number;
}

/** Prices by model name as the model server answers it (or as the call asked for it); `*` prices any model not named. */
export type ModelPrices = Readonly<Record<string, Readonly<ModelPrice>>>;

const PRICE_KEYS = ['input_usd_per_million', 'output_usd_per_million'] as const;
const MODEL_NAME_RE = /^(\*|[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199})$/;

/** A setting's text as a JSON object: `<key> is not JSON: ...`, or `<key> must be a JSON object<shape>`. */
export function jsonObjectSetting(text: string, key: string, shape: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new Error(`${key} is not JSON: ${(err as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error(`${key} must be a JSON object${shape}`);
  return parsed as Record<string, unknown>;
}

/**
 * Reads `AGENTRUN_MODEL_PRICES`, `{"<model>": {"input_usd_per_million": 0.15, "output_usd_per_million": 0.6}, "*": {...}}`.
 * Empty or unset is no prices: calls still count their tokens, and their cost is 0 with `priced: false`.
 * Anything else malformed (not JSON, an unknown key, a price that is not a finite number >= 0) stops the
 * service at start with the setting's name.
 */
export function parseModelPrices(text: string | undefined, key = 'AGENTRUN_MODEL_PRICES'): ModelPrices {
  if (text === undefined || text.trim() === '') return Object.freeze({});
  const entries = jsonObjectSetting(text, key, ' of prices by model, {"<model>": {"input_usd_per_million": n, "output_usd_per_million": n}}');
  const prices: Record<string, ModelPrice> = {};
  for (const [model, value] of Object.entries(entries)) {
    const where = `${key}.${model}`;
    if (!MODEL_NAME_RE.test(model)) throw new Error(`${key}: '${model}' is not a model name (or "*")`);
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error(`${where} must be an object with ${PRICE_KEYS.join(' and ')}`);
    const entry = value as Record<string, unknown>;
    const unknown = Object.keys(entry).filter((k) => !(PRICE_KEYS as readonly string[]).includes(k));
    if (unknown.length) throw new Error(`${where} takes ${PRICE_KEYS.join(' and ')}, not ${unknown.map((k) => JSON.stringify(k)).join(', ')}`);
    for (const k of PRICE_KEYS) {
      const n = entry[k];
      if (typeof n !== 'number' || !Number.isFinite(n) || n < 0) throw new Error(`${where}.${k} must be a number of US dollars >= 0, got ${JSON.stringify(n)}`);
    }
    prices[model] = Object.freeze({ input_usd_per_million: entry.input_usd_per_million as number, output_usd_per_million: entry.output_usd_per_million as number });
  }
  return Object.freeze(prices);
}

/** The price of a model: its own entry, else `*`, else none. */
export function priceOf(prices: ModelPrices, model: string): Readonly<ModelPrice> | undefined {
  return Object.hasOwn(prices, model) ? prices[model] : Object.hasOwn(prices, '*') ? prices['*'] : undefined;
}

/** Cost in US dollars of a call's tokens, rounded to a millionth of a cent (the ledger's precision). */
export function costOf(price: Readonly<ModelPrice>, promptTokens: number, completionTokens: number): number {
  const usd = (promptTokens * price.input_usd_per_million + completionTokens * price.output_usd_per_million) / 1_000_000;
  return Math.round(usd * 1e8) / 1e8;
}

/** The setting group of the processes that make model calls and price them (the orchestrator). */
export const modelPricesSpec = {
  AGENTRUN_MODEL_PRICES: { read: (env, key) => parseModelPrices(env[key], key) } satisfies Setting<ModelPrices>,
};
