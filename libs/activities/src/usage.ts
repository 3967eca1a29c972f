import { costOf, priceOf, type ModelPrices } from '@agentrun/config';
import type { ModelCallUsage } from '@agentrun/contracts';
import type { ChatReply } from './llm';

/** About four characters a token: the estimate used when a server reports no usage. */
const CHARS_PER_TOKEN = 4;

/** A text's tokens estimated from its length (never 0 for a non-empty text). */
export function estimateTokens(text: string): number {
  return Math.ceil(text.length / CHARS_PER_TOKEN);
}

/** The texts of a request's messages, as the estimate counts them: contents and tool calls' arguments. */
function promptText(messages: readonly unknown[]): string {
  let text = '';
  for (const m of messages) {
    if (typeof m !== 'object' || m === null) continue;
    const { content, tool_calls } = m as { content?: unknown; tool_calls?: unknown };
    if (typeof content === 'string') text += content;
    if (Array.isArray(tool_calls)) for (const c of tool_calls) text += JSON.stringify((c as { function?: unknown })?.function ?? c);
  }
  return text;
}

/** The model's price: the requested name's, else the name the server answers with, else `*`. */
function priceFor(prices: ModelPrices, requested: string, answered?: string) {
  return Object.hasOwn(prices, requested) ? prices[requested] : priceOf(prices, answered ?? requested);
}

/**
 * What a call may cost at most, reserved before it is made: its prompt (estimated from the texts) and
 * `maxTokens` of completion, at the requested model's price.
 */
export function worstCaseOf(messages: readonly unknown[], requested: string, prices: ModelPrices, maxTokens: number): { tokens: number; usd: number } {
  const prompt = estimateTokens(promptText(messages));
  const price = priceFor(prices, requested);
  return { tokens: prompt + maxTokens, usd: price ? costOf(price, prompt, maxTokens) : 0 };
}

/**
 * One call's tokens and cost. The tokens are the server's `usage`; without it they are estimated from
 * the texts and marked `estimated`. The price is the requested model's (the name a run or the
 * deployment asks for), else the name the server answered with, else the table's `*`; with none the
 * call costs 0 and is marked unpriced.
 */
export function usageOf(call: { messages: readonly unknown[] }, reply: Pick<ChatReply, 'usage' | 'model' | 'content' | 'tool_calls'>, requested: string, prices: ModelPrices): ModelCallUsage {
  const estimated = reply.usage === null;
  const prompt = reply.usage?.prompt_tokens ?? estimateTokens(promptText(call.messages));
  const completion = reply.usage?.completion_tokens ?? estimateTokens((reply.content ?? '') + reply.tool_calls.map((t) => t.name + t.raw_arguments).join(''));
  const price = priceFor(prices, requested, reply.model);
  return {
    model: requested,
    prompt_tokens: prompt,
    completion_tokens: completion,
    cost_usd: price ? costOf(price, prompt, completion) : 0,
    priced: price !== undefined,
    ...(estimated ? { estimated: true } : {}),
  };
}
