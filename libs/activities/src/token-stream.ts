import type { RunTokenDelta } from '@agentrun/contracts';

/** Where a model call's deltas go (the orchestrator sends them to `agentrun.run-tokens.v1`). */
export interface TokenSink {
  send(deltas: RunTokenDelta[]): Promise<void>;
}

/** Which call the deltas belong to. */
export type TokenStreamOf = Pick<RunTokenDelta, 'org' | 'run_id' | 'step' | 'attempt'>;

/**
 * One model call's deltas on their way out, numbered from 0 in the order they came. Each send takes
 * everything that arrived while the one before it was out, so a fast stream costs few round trips and
 * a slow one sends each delta at once. A failed send is given to `onError` (with how many deltas it
 * held) and its deltas are dropped:
 * they are live only, and the step's event records the whole reply; the call goes on.
 */
export class TokenStream {
  private index = 0;
  private pending: RunTokenDelta[] = [];
  private sending?: Promise<void>;

  constructor(
    private readonly sink: TokenSink,
    private readonly of: TokenStreamOf,
    private readonly onError: (err: unknown, dropped: number) => void,
  ) {}

  push(delta: string): void {
    if (delta === '') return;
    this.pending.push({ ...this.of, index: this.index++, delta });
    this.sending ??= this.drain();
  }

  /** Resolves once every delta pushed so far was sent (or dropped). Never rejects. */
  async close(): Promise<void> {
    await this.sending;
  }

  /** Deltas pushed so far. */
  get count(): number {
    return this.index;
  }

  private async drain(): Promise<void> {
    while (this.pending.length > 0) {
      const batch = this.pending;
      this.pending = [];
      try {
        await this.sink.send(batch);
      } catch (err) {
        this.onError(err, batch.length);
      }
    }
    this.sending = undefined;
  }
}
