import { contiguousPrefix, type RunEventsRead, type StoredRunEvent } from './read-model';

/**
 * The read model's `eachEventsAfter`: hands `each(i, events)`, once for every read and in the order
 * given, the run's applied events after its `after`, in seq order, at most `limit` per run, each as
 * soon as its rows are in. Resolves once all were handed; rejects if the read failed, and the reads
 * not handed by then get nothing.
 */
export type ReadEventsAfterMany = (reads: RunEventsRead[], limit: number, each: (index: number, events: StoredRunEvent[]) => void) => Promise<void>;

/** One open stream on a run, as the fan-out sees it. */
export interface RunStreamSink {
  /** The last seq the stream has sent; undefined while it is still reading its backlog itself. */
  cursor(): number | undefined;
  /**
   * The cursor is a seq the read model has applied: 0, or a seq this stream was sent. A read from it
   * skips the run's applied-bound lookup. Absent or false for a resume point a client only claimed.
   */
  cursorApplied?(): boolean;
  /**
   * The run's events after `after`, contiguous and in order. `after` is at or before the stream's
   * cursor when the read started; a stream that caught up meanwhile may find it past its cursor and
   * then reads the gap itself.
   */
  deliver(events: StoredRunEvent[], after: number): void;
  /** The run may have new events and the stream is still reading its backlog: it reads again after. */
  wake(): void;
  /** The shared read failed. */
  fail(err: unknown): void;
}

export interface RunEventFanoutOptions {
  /** Events of one run per read at most, when it is alone in its read (default 500). */
  page?: number;
  /**
   * Rows one batched read returns at most (default 10,000): each run's limit is this over the runs in
   * the read, at least 10 and at most `page`. A run that filled its limit is read again after.
   */
  batchRows?: number;
  /** Runs in one batched read at most (default 1,000); more wait for the next read. */
  batchRuns?: number;
  /** Batched reads in flight at once (default 2); touches meanwhile wait and fold into the next read. */
  concurrency?: number;
}

interface Feed {
  key: string;
  org: string;
  runId: string;
  sinks: Set<RunStreamSink>;
  /** In a batched read now. */
  reading: boolean;
  /** Touched while in a read: read again after it. */
  again: boolean;
}

/** One run's share of a batched read: the streams it was read for, from the lowest of their cursors. */
interface Share {
  feed: Feed;
  ready: RunStreamSink[];
  after: number;
  /** `after` is known to be applied (a stream at it says so). */
  afterApplied: boolean;
}

/** Fewest events per run a batched read asks for, however many runs it holds. */
const MIN_PER_RUN = 10;

/**
 * Fans batched reads out to every stream on the touched runs. The touches of one notice (and of any
 * notices that arrive while earlier reads are in flight) are read together: ONE query for every touched
 * run, each run from the lowest cursor among its streams, and each stream sends only what is past its
 * own cursor. A run already in a read is not read twice at once: touches meanwhile fold into one more
 * read after it. Without this, 1,000 streams on 1,000 runs cost 1,000 queries per commit against the
 * pool; with it, one. Each run's events are handed to its streams as the read's rows arrive, so the
 * first frames leave while Postgres still sends the rest.
 */
export class RunEventFanout {
  private readonly feeds = new Map<string, Feed>();
  /** Runs touched and not yet in a read, in the order they were touched. */
  private readonly queue = new Set<Feed>();
  private inFlight = 0;
  private flushScheduled = false;
  private readonly page: number;
  private readonly batchRows: number;
  private readonly batchRuns: number;
  private readonly concurrency: number;

  constructor(
    private readonly read: ReadEventsAfterMany,
    options: RunEventFanoutOptions = {},
  ) {
    this.page = options.page ?? 500;
    this.batchRows = options.batchRows ?? 10_000;
    this.batchRuns = options.batchRuns ?? 1_000;
    this.concurrency = options.concurrency ?? 2;
  }

  /** Adds a stream to its run's feed; returns the function that removes it. */
  subscribe(org: string, runId: string, sink: RunStreamSink): () => void {
    const k = key(org, runId);
    let feed = this.feeds.get(k);
    if (!feed) {
      feed = { key: k, org, runId, sinks: new Set(), reading: false, again: false };
      this.feeds.set(k, feed);
    }
    const own = feed;
    own.sinks.add(sink);
    return () => {
      own.sinks.delete(sink);
      if (own.sinks.size === 0 && this.feeds.get(k) === own) {
        this.feeds.delete(k);
        this.queue.delete(own);
      }
    };
  }

  /** The run may have new events. Touches made in one go (one notice) are read in one query. */
  touch(org: string, runId: string): void {
    const feed = this.feeds.get(key(org, runId));
    if (!feed) return;
    this.mark(feed);
    this.schedule();
  }

  /** Every run may have new events (notices were lost with the LISTEN connection, or a notice said `*`). */
  touchAll(): void {
    for (const feed of this.feeds.values()) this.mark(feed);
    this.schedule();
  }

  /** Streams open, every run together. */
  get streams(): number {
    let n = 0;
    for (const feed of this.feeds.values()) n += feed.sinks.size;
    return n;
  }

  /** Batched reads in flight now. */
  get reading(): number {
    return this.inFlight;
  }

  private mark(feed: Feed): void {
    for (const sink of feed.sinks) if (sink.cursor() === undefined) sink.wake();
    if (feed.reading) feed.again = true;
    else this.queue.add(feed);
  }

  /** Reads once the caller's synchronous run of touches is over, so they share one query. */
  private schedule(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    queueMicrotask(() => {
      this.flushScheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    while (this.inFlight < this.concurrency && this.queue.size > 0) {
      const shares: Share[] = [];
      for (const feed of this.queue) {
        if (shares.length >= this.batchRuns) break;
        this.queue.delete(feed);
        if (this.feeds.get(feed.key) !== feed) continue;
        // Streams still reading their backlog were woken by the touch and read for themselves.
        const low = lowestCursor(feed.sinks);
        if (low === undefined) continue;
        feed.reading = true;
        feed.again = false;
        const ready = [...feed.sinks].filter((s) => s.cursor() !== undefined);
        shares.push({ feed, ready, after: low.at, afterApplied: low.applied });
      }
      if (shares.length === 0) continue;
      this.inFlight++;
      void this.readShares(shares);
    }
  }

  private async readShares(shares: Share[]): Promise<void> {
    const limit = Math.min(this.page, Math.max(MIN_PER_RUN, Math.floor(this.batchRows / shares.length)));
    // Each run is handed its events as soon as its rows are in, while the rest are still coming: the
    // first streams' frames are on the wire before Postgres has sent the last run's rows.
    let handed = 0;
    let error: unknown;
    try {
      await this.read(
        shares.map((s) => ({ org: s.feed.org, runId: s.feed.runId, after: s.after, afterApplied: s.afterApplied })),
        limit,
        (i, events) => {
          handed = i + 1;
          this.deliverShare(shares[i], events, limit, undefined);
        },
      );
    } catch (err) {
      error = err ?? new Error('the batched read failed');
    }
    // Runs the read did not reach (it failed part-way) stay `reading` until now, so a touch meanwhile
    // folds into one more read after this one; the read counts against `concurrency` until then too.
    for (const share of shares.slice(handed)) this.deliverShare(share, undefined, limit, error);
    this.inFlight--;
    this.flush();
  }

  /** Hands one run's read to its streams, or its failure. */
  private deliverShare({ feed, ready, after }: Share, rows: StoredRunEvent[] | undefined, limit: number, error: unknown): void {
    feed.reading = false;
    // A stream that left meanwhile gets nothing; one that joined meanwhile read for itself.
    const open = ready.filter((sink) => feed.sinks.has(sink));
    if (rows === undefined) {
      for (const sink of open) sink.fail(error);
    } else {
      const events = contiguousPrefix(rows, after);
      for (const sink of open) {
        try {
          sink.deliver(events, after);
        } catch (err) {
          sink.fail(err);
        }
      }
      // A full page: read on from the new lowest cursor, unless it moved no stream (one that
      // stopped sending is not read again until the next touch).
      if (rows.length >= limit && !feed.again && this.feeds.get(feed.key) === feed) {
        const next = lowestCursor(feed.sinks)?.at;
        if (next !== undefined && next > after) this.queue.add(feed);
      }
    }
    if (feed.again && this.feeds.get(feed.key) === feed) this.queue.add(feed);
  }
}

/**
 * The lowest cursor among the streams that have one, and whether a stream at it says it is applied;
 * undefined when none has a cursor.
 */
function lowestCursor(sinks: Iterable<RunStreamSink>): { at: number; applied: boolean } | undefined {
  let low: { at: number; applied: boolean } | undefined;
  for (const sink of sinks) {
    const at = sink.cursor();
    if (at === undefined) continue;
    const applied = sink.cursorApplied?.() === true;
    if (low === undefined || at < low.at) low = { at, applied };
    else if (at === low.at && applied) low.applied = true;
  }
  return low;
}

function key(org: string, runId: string): string {
  return `${org}\u0000${runId}`;
}
