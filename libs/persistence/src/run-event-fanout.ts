import type { RunEventEnvelope } from '@agentrun/contracts';
import { contiguousPrefix } from './read-model';

/** The read model's `eventsAfter`. */
export type ReadEventsAfter = (org: string, runId: string, after: number, limit: number) => Promise<RunEventEnvelope[]>;

/** One open stream on a run, as the fan-out sees it. */
export interface RunStreamSink {
  /** The last seq the stream has sent; undefined while it is still reading its backlog itself. */
  cursor(): number | undefined;
  /**
   * The run's events after `after`, contiguous and in order. `after` is at or before the stream's
   * cursor when the read started; a stream that caught up meanwhile may find it past its cursor and
   * then reads the gap itself.
   */
  deliver(events: RunEventEnvelope[], after: number): void;
  /** The run may have new events and the stream is still reading its backlog: it reads again after. */
  wake(): void;
  /** The shared read failed. */
  fail(err: unknown): void;
}

interface Feed {
  org: string;
  runId: string;
  sinks: Set<RunStreamSink>;
  reading: boolean;
  again: boolean;
}

/**
 * Fans one read out to every stream on a run. A commit that touches a run costs one query for all the
 * streams on it, from the lowest cursor among them; each stream sends only what is past its own cursor.
 * Without this, N streams on one run cost N queries per commit, each a connection from the pool.
 */
export class RunEventFanout {
  private readonly feeds = new Map<string, Feed>();

  constructor(
    private readonly read: ReadEventsAfter,
    private readonly page = 500,
  ) {}

  /** Adds a stream to its run's feed; returns the function that removes it. */
  subscribe(org: string, runId: string, sink: RunStreamSink): () => void {
    const k = key(org, runId);
    let feed = this.feeds.get(k);
    if (!feed) {
      feed = { org, runId, sinks: new Set(), reading: false, again: false };
      this.feeds.set(k, feed);
    }
    const own = feed;
    own.sinks.add(sink);
    return () => {
      own.sinks.delete(sink);
      if (own.sinks.size === 0 && this.feeds.get(k) === own) this.feeds.delete(k);
    };
  }

  /** The run may have new events. */
  touch(org: string, runId: string): void {
    const feed = this.feeds.get(key(org, runId));
    if (feed) void this.pump(feed);
  }

  /** Every run may have new events (notices were lost with the LISTEN connection). */
  touchAll(): void {
    for (const feed of this.feeds.values()) void this.pump(feed);
  }

  /** Streams open, every run together. */
  get streams(): number {
    let n = 0;
    for (const feed of this.feeds.values()) n += feed.sinks.size;
    return n;
  }

  private async pump(feed: Feed): Promise<void> {
    for (const sink of feed.sinks) if (sink.cursor() === undefined) sink.wake();
    // Touches during a read are folded into one more read after it.
    if (feed.reading) {
      feed.again = true;
      return;
    }
    feed.reading = true;
    try {
      do {
        feed.again = false;
        let previous: number | undefined;
        for (;;) {
          const ready = [...feed.sinks].filter((s) => s.cursor() !== undefined);
          if (ready.length === 0) break;
          const after = Math.min(...ready.map((s) => s.cursor() as number));
          // A full page that moved no stream (one that stopped sending) is not read again.
          if (after === previous) break;
          previous = after;
          let events: RunEventEnvelope[];
          try {
            events = contiguousPrefix(await this.read(feed.org, feed.runId, after, this.page), after);
          } catch (err) {
            for (const sink of ready) if (feed.sinks.has(sink)) sink.fail(err);
            return;
          }
          // A stream that left meanwhile gets nothing; one that joined meanwhile reads for itself.
          for (const sink of ready) if (feed.sinks.has(sink)) sink.deliver(events, after);
          if (events.length < this.page) break;
        }
      } while (feed.again);
    } finally {
      feed.reading = false;
    }
  }
}

function key(org: string, runId: string): string {
  return `${org}\u0000${runId}`;
}
