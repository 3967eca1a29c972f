/**
 * Requests to the model, one at a time. The model has one context and the machine two cores: a second
 * generation beside the first would only halve both. Waiting requests are bounded, so a burst is told to
 * come back (503 with Retry-After) instead of piling up behind a queue it would time out in.
 */

/** The queue is full: the request was not taken. */
export class QueueFullError extends Error {
  override readonly name = 'QueueFullError';
  constructor(readonly waiting: number) {
    super(`the model is busy and ${waiting} requests are already waiting`);
  }
}

/** The server is shutting down: the request was not taken, or was dropped while it waited. */
export class QueueClosedError extends Error {
  override readonly name = 'QueueClosedError';
  constructor() {
    super('the server is shutting down');
  }
}

interface Waiting {
  start: () => void;
  reject: (err: unknown) => void;
}

export class SerialQueue {
  private readonly waiting: Waiting[] = [];
  private running: Promise<unknown> | undefined;
  private closed = false;

  /** `maxWaiting`: how many requests may wait behind the running one (0: none). */
  constructor(private readonly maxWaiting: number) {
    if (!Number.isInteger(maxWaiting) || maxWaiting < 0) throw new RangeError(`maxWaiting must be a whole number >= 0, got ${maxWaiting}`);
  }

  get depth(): { running: boolean; waiting: number } {
    return { running: this.running !== undefined, waiting: this.waiting.length };
  }

  /**
   * Runs `task` once every earlier one has finished. Rejects at once with `QueueFullError` when the queue
   * is full, with `QueueClosedError` after `close()`, and with `signal.reason` if the signal aborts while
   * the task still waits (it is then never started).
   */
  run<T>(task: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (this.closed) return Promise.reject(new QueueClosedError());
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.running === undefined) return this.start(task);
    if (this.waiting.length >= this.maxWaiting) return Promise.reject(new QueueFullError(this.waiting.length));
    return new Promise<T>((resolve, reject) => {
      const entry: Waiting = {
        start: () => {
          signal?.removeEventListener('abort', onAbort);
          this.start(task).then(resolve, reject);
        },
        reject: (err) => {
          signal?.removeEventListener('abort', onAbort);
          reject(err);
        },
      };
      const onAbort = () => {
        const at = this.waiting.indexOf(entry);
        if (at >= 0) this.waiting.splice(at, 1);
        entry.reject(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(entry);
    });
  }

  /** Refuses new tasks and drops the waiting ones; the running one goes on. Resolves when it has finished. */
  async close(): Promise<void> {
    this.closed = true;
    for (const entry of this.waiting.splice(0)) entry.reject(new QueueClosedError());
    await this.running?.catch(() => undefined);
  }

  private start<T>(task: () => Promise<T>): Promise<T> {
    const running = (async () => task())();
    this.running = running;
    const next = () => {
      this.running = undefined;
      this.waiting.shift()?.start();
    };
    running.then(next, next);
    return running;
  }
}
