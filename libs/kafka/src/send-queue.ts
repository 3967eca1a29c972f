/** A coalesced request's records (one topic's), in the order they were sent. */
export interface TopicRecords<M> {
  topic: string;
  messages: M[];
}

interface Waiting<M> {
  topic: string;
  messages: M[];
  bytes: number;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * Sends that arrive while one is in flight go out together in the next request. The idempotent
 * producer keeps one request in flight per broker, so without this every concurrent send (each run's
 * events, each command's outcome) waits for the ones before it, one round trip each, and under load
 * that queue is where the time goes. A send made while nothing is in flight leaves at once: nothing
 * waits on a timer. Order holds: sends leave in the order they were made, a request's records keep
 * that order, and the next request is sent only once the last is acknowledged. A request holds sends
 * of one topic up to `maxBytes` of records (one larger send goes alone); a failed request fails every
 * send in it, and the queue goes on.
 */
export class SendQueue<M> {
  private readonly waiting: Waiting<M>[] = [];
  private draining?: Promise<void>;

  constructor(
    private readonly sendRequest: (records: TopicRecords<M>) => Promise<void>,
    private readonly sizeOf: (message: M) => number,
    private readonly maxBytes: number,
  ) {}

  /** Resolves once the request carrying these messages is acknowledged. */
  send(topic: string, messages: M[]): Promise<void> {
    if (messages.length === 0) return Promise.resolve();
    let bytes = 0;
    for (const m of messages) bytes += this.sizeOf(m);
    return new Promise<void>((resolve, reject) => {
      this.waiting.push({ topic, messages, bytes, resolve, reject });
      if (!this.draining) this.draining = this.drain();
    });
  }

  /** Sends waiting now (none when idle): settles once all of them are acknowledged or failed. */
  async idle(): Promise<void> {
    while (this.draining) await this.draining;
  }

  private async drain(): Promise<void> {
    try {
      while (this.waiting.length > 0) {
        const request = this.next();
        try {
          await this.sendRequest(recordsOf(request));
          for (const w of request) w.resolve();
        } catch (err) {
          for (const w of request) w.reject(err);
        }
      }
    } finally {
      // In the same turn as the last look at `waiting`: a send made by a caller this request just
      // answered (its continuation runs after this) starts the next drain, it is never left waiting.
      this.draining = undefined;
    }
  }

  /**
   * The sends of the next request: the first waiting, then the later ones to the same topic while they
   * fit. One topic per request, so a topic the broker refuses (no such topic, no WRITE on it) fails only
   * its own sends; sends to other topics keep their order and go in the next request.
   */
  private next(): Waiting<M>[] {
    const first = this.waiting.shift()!;
    const taken = [first];
    let bytes = first.bytes;
    for (let i = 0; i < this.waiting.length && bytes < this.maxBytes; ) {
      const w = this.waiting[i];
      if (w.topic !== first.topic) {
        i++;
        continue;
      }
      // A topic's sends leave in order: one that does not fit ends the request.
      if (bytes + w.bytes > this.maxBytes) break;
      this.waiting.splice(i, 1);
      bytes += w.bytes;
      taken.push(w);
    }
    return taken;
  }
}

/** The sends' records, one topic's, in send order. */
function recordsOf<M>(sends: Waiting<M>[]): TopicRecords<M> {
  return { topic: sends[0].topic, messages: sends.flatMap((s) => s.messages) };
}
