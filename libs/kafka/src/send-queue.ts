/** A coalesced request's records (one topic's), in the order they were sent. */
export interface TopicRecords<M> {
  topic: string;
  messages: M[];
}

interface Waiting<M> {
  messages: M[];
  bytes: number;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/** One topic's sends while any is waiting or in flight: those waiting, and the drain sending them. */
interface Lane<M> {
  waiting: Waiting<M>[];
  draining?: Promise<void>;
}

/** Why a send made after `close()` is refused. */
export class SendQueueClosed extends Error {
  constructor() {
    super('the Kafka producer is closing: no new sends');
    this.name = 'SendQueueClosed';
  }
}

/**
 * Sends to a topic that arrive while one of its requests is in flight go out together in its next
 * request. The idempotent producer keeps one request in flight per broker, so without this every
 * concurrent send (each run's events, each command's outcome) waits for the ones before it, one round
 * trip each, and under load that queue is where the time goes. A send made while nothing of its topic
 * is in flight leaves at once: nothing waits on a timer. Each topic is a lane of its own, so a topic
 * the broker is slow on or refuses (no such topic, no WRITE on it) holds up and fails only its own
 * sends. Within a topic order holds: sends leave in the order they were made, a request's records keep
 * that order, and its next request is sent only once the last is answered. A request holds up to
 * `maxBytes` of records (one larger send goes alone); a failed request fails every send in it (records
 * of it another partition had acknowledged are sent again by their callers, which consumers dedupe).
 */
export class SendQueue<M> {
  private readonly lanes = new Map<string, Lane<M>>();
  private closed = false;

  constructor(
    private readonly sendRequest: (records: TopicRecords<M>) => Promise<void>,
    private readonly sizeOf: (message: M) => number,
    private readonly maxBytes: number,
  ) {}

  /** Resolves once the request carrying these messages is acknowledged. */
  async send(topic: string, messages: M[]): Promise<void> {
    if (this.closed) throw new SendQueueClosed();
    if (messages.length === 0) return;
    let bytes = 0;
    for (const m of messages) bytes += this.sizeOf(m);
    const lane: Lane<M> = this.lanes.get(topic) ?? { waiting: [] };
    this.lanes.set(topic, lane);
    await new Promise<void>((resolve, reject) => {
      lane.waiting.push({ messages, bytes, resolve, reject });
      lane.draining ??= this.drain(topic, lane);
    });
  }

  /**
   * Refuses new sends (`SendQueueClosed`) and settles once every send made before is acknowledged or
   * failed: part of a producer's close, before it disconnects.
   */
  async close(): Promise<void> {
    this.closed = true;
    // Every lane is draining (a send starts its lane's drain in the same turn), and none starts after this.
    await Promise.all([...this.lanes.values()].flatMap((lane) => (lane.draining ? [lane.draining] : [])));
  }

  private async drain(topic: string, lane: Lane<M>): Promise<void> {
    // Never in the caller's turn: `draining` is set before the first request is made or fails.
    await Promise.resolve();
    try {
      while (lane.waiting.length > 0) {
        const request = this.next(lane);
        try {
          await this.sendRequest({ topic, messages: request.flatMap((w) => w.messages) });
          for (const w of request) w.resolve();
        } catch (err) {
          for (const w of request) w.reject(err);
        }
      }
    } finally {
      // In the same turn as the last look at `waiting`: a send made by a caller this request just
      // answered (its continuation runs after this) starts the next drain, it is never left waiting.
      lane.draining = undefined;
      this.lanes.delete(topic);
    }
  }

  /** The sends of a lane's next request: the first waiting, then those after it while they fit. */
  private next(lane: Lane<M>): Waiting<M>[] {
    const taken = [lane.waiting.shift()!];
    let bytes = taken[0].bytes;
    while (lane.waiting.length > 0 && bytes + lane.waiting[0].bytes <= this.maxBytes) {
      const w = lane.waiting.shift()!;
      bytes += w.bytes;
      taken.push(w);
    }
    return taken;
  }
}
