import type { BatchContext } from './bus';

export type Retried<T> = { done: true; value: T } | { done: false };

/**
 * Runs `attempt` until it succeeds, backing off (250 ms doubling to 10 s) while keeping the group
 * membership alive. Gives up, with nothing decided, only when the consumer stops or loses the
 * partition; the message then stays uncommitted for whoever owns it next.
 */
export async function retryWhileActive<T>(
  ctx: BatchContext,
  attempt: () => Promise<T>,
  onError: (err: unknown, attempt: number, delayMs: number) => void,
): Promise<Retried<T>> {
  for (let n = 1; ; n++) {
    try {
      return { done: true, value: await attempt() };
    } catch (err) {
      const delay = Math.min(10_000, 250 * 2 ** Math.min(n, 6));
      onError(err, n, delay);
      const until = Date.now() + delay;
      while (Date.now() < until) {
        if (!ctx.isActive()) return { done: false };
        await ctx.heartbeat().catch(() => undefined);
        await new Promise((resolve) => setTimeout(resolve, Math.min(500, until - Date.now())));
      }
      if (!ctx.isActive()) return { done: false };
    }
  }
}
