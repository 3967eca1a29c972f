import type { RunEventEnvelope } from '@agentrun/contracts';
import type { RunEventsRead, StoredRunEvent } from './read-model';
import { RunEventFanout, type RunStreamSink } from './run-event-fanout';

function event(seq: number, org = 'acme', runId = 'r1'): StoredRunEvent {
  return { seq, event: { org, run_id: runId, seq, type: 'step_completed', ts: '2026-01-01T00:00:00.000Z', payload: {} } as unknown as RunEventEnvelope, traceparent: null };
}

/** Stored events by run, and every batched read made against them (what each asked for). */
function store() {
  const runs = new Map<string, StoredRunEvent[]>();
  const reads: { runs: string[]; afters: number[]; limit: number }[] = [];
  /** Per read, which runs it was told start at an applied seq. */
  const applied: boolean[][] = [];
  let gate: Promise<void> = Promise.resolve();
  const k = (org: string, runId: string) => `${org}/${runId}`;
  const db = {
    reads,
    applied,
    /** Appends events with these seqs to the run (seqs may leave a gap, as a stored-but-unapplied tail would not). */
    add(org: string, runId: string, ...seqs: number[]): void {
      const list = runs.get(k(org, runId)) ?? [];
      list.push(...seqs.map((s) => event(s, org, runId)));
      list.sort((a, b) => a.seq - b.seq);
      runs.set(k(org, runId), list);
    },
    /** The next reads wait until the returned function is called. */
    hold(): () => void {
      let release!: () => void;
      gate = new Promise((r) => (release = r));
      return release;
    },
    failNext: undefined as Error | undefined,
    /** How many reads the failing read hands over before it fails (as a query failing part-way would). */
    failAfter: 0,
    /** Called after each read is handed over, with its index. */
    onHanded: undefined as ((index: number) => void) | undefined,
    read: async (batch: RunEventsRead[], limit: number, each: (index: number, events: StoredRunEvent[]) => void): Promise<void> => {
      reads.push({ runs: batch.map((r) => k(r.org, r.runId)), afters: batch.map((r) => r.after), limit });
      applied.push(batch.map((r) => r.afterApplied === true));
      const failure = db.failNext;
      db.failNext = undefined;
      // What the query sees is what was committed when it started.
      const result = batch.map((r) => (runs.get(k(r.org, r.runId)) ?? []).filter((e) => e.seq > r.after).slice(0, limit));
      await gate;
      for (const [i, events] of result.entries()) {
        if (failure && i >= db.failAfter) break;
        each(i, events);
        db.onHanded?.(i);
      }
      if (failure) throw failure;
    },
  };
  return db;
}

/**
 * A stream that has caught up to `from` and sends what it is handed past its cursor, once each. Its
 * cursor is applied unless `from` was only claimed (a client's resume point), until it sends a seq.
 */
function sink(from: number, { claimed = false } = {}) {
  let last = from;
  let applied = !claimed;
  const s: RunStreamSink & { sent: number[]; gaps: number; failures: unknown[]; woken: number } = {
    sent: [],
    gaps: 0,
    failures: [],
    woken: 0,
    cursor: () => last,
    cursorApplied: () => applied,
    deliver(events, after) {
      if (after > last) {
        s.gaps++;
        return;
      }
      for (const e of events) {
        if (e.seq <= last) continue;
        if (e.seq !== last + 1) throw new Error(`seq ${e.seq} after ${last}: not contiguous`);
        s.sent.push(e.seq);
        last = e.seq;
        applied = true;
      }
    },
    wake: () => void s.woken++,
    fail: (err) => void s.failures.push(err),
  };
  return s;
}

/** Lets every queued read and delivery run (the fan-out reads after a microtask, the store after a turn). */
const settle = async () => {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
};

describe('RunEventFanout', () => {
  it('reads a touched run once for any number of streams on it, each getting every event past its own resume point', async () => {
    for (const n of [1, 5, 50]) {
      const db = store();
      db.add('acme', 'r1', 1, 2, 3);
      const fanout = new RunEventFanout(db.read);
      const sinks = Array.from({ length: n }, (_, i) => sink(i % 4));
      sinks.forEach((s) => fanout.subscribe('acme', 'r1', s));
      db.add('acme', 'r1', 4);
      fanout.touch('acme', 'r1');
      await settle();
      expect(db.reads).toEqual([{ runs: ['acme/r1'], afters: [0], limit: 500 }]);
      sinks.forEach((s, i) => expect(s.sent).toEqual([1, 2, 3, 4].slice(i % 4)));
      expect(fanout.streams).toBe(n);
    }
  });

  it('reads every run of one notice in ONE query, each run from its own lowest cursor, and each stream gets only its own run', async () => {
    const db = store();
    const runs = Array.from({ length: 300 }, (_, i) => `r${i}`);
    const fanout = new RunEventFanout(db.read);
    const streams = runs.map((r, i) => {
      db.add('acme', r, 1, 2, 3);
      const s = sink(i % 3);
      fanout.subscribe('acme', r, s);
      return s;
    });
    // The same run id in another org is another run: read for its own streams, never handed to acme's.
    db.add('globex', 'r0', 1, 2, 3, 4, 5);
    const foreign = sink(0);
    fanout.subscribe('globex', 'r0', foreign);
    for (const r of runs) fanout.touch('acme', r);
    await settle();
    expect(db.reads).toHaveLength(1);
    expect(db.reads[0].runs).toEqual(runs.map((r) => `acme/${r}`));
    expect(db.reads[0].afters).toEqual(runs.map((_, i) => i % 3));
    // 10,000 rows over 300 runs: 33 each.
    expect(db.reads[0].limit).toBe(33);
    streams.forEach((s, i) => expect(s.sent).toEqual([1, 2, 3].slice(i % 3)));
    expect(foreign.sent).toEqual([]);
    fanout.touch('globex', 'r0');
    await settle();
    expect(db.reads[1].runs).toEqual(['globex/r0']);
    expect(foreign.sent).toEqual([1, 2, 3, 4, 5]);
  });

  it('reads every run with a stream in one query after touchAll (a `*` notice or a lost connection)', async () => {
    const db = store();
    const fanout = new RunEventFanout(db.read);
    const a = sink(0);
    const b = sink(1);
    db.add('acme', 'a', 1);
    db.add('acme', 'b', 1, 2);
    fanout.subscribe('acme', 'a', a);
    fanout.subscribe('acme', 'b', b);
    fanout.touchAll();
    await settle();
    expect(db.reads).toEqual([{ runs: ['acme/a', 'acme/b'], afters: [0, 1], limit: 500 }]);
    expect(a.sent).toEqual([1]);
    expect(b.sent).toEqual([2]);
  });

  it('sends only the contiguous prefix: nothing past a gap until it fills, then the rest once each', async () => {
    const db = store();
    const fanout = new RunEventFanout(db.read);
    const streams = [sink(0), sink(1), sink(3)];
    streams.forEach((s) => fanout.subscribe('acme', 'r1', s));
    db.add('acme', 'r1', 1, 2, 4, 5);
    fanout.touch('acme', 'r1');
    await settle();
    expect(streams.map((s) => s.sent)).toEqual([[1, 2], [2], []]);
    db.add('acme', 'r1', 3);
    fanout.touch('acme', 'r1');
    await settle();
    expect(streams.map((s) => s.sent)).toEqual([[1, 2, 3, 4, 5], [2, 3, 4, 5], [4, 5]]);
    expect(db.reads.map((r) => r.afters)).toEqual([[0], [2]]);
  });

  it('folds touches during a read into one more read after it; runs touched meanwhile are read together in the next query', async () => {
    const db = store();
    db.add('acme', 'r1', 1, 2);
    const fanout = new RunEventFanout(db.read, { concurrency: 1 });
    const streams = [sink(0), sink(0), sink(0)];
    streams.forEach((s) => fanout.subscribe('acme', 'r1', s));
    const others = ['r2', 'r3'].map((r) => {
      db.add('acme', r, 1);
      const s = sink(0);
      fanout.subscribe('acme', r, s);
      return s;
    });
    const release = db.hold();
    fanout.touch('acme', 'r1');
    await settle();
    expect(db.reads).toHaveLength(1);
    // While r1's read is in flight: ten more touches of r1, and touches of r2 and r3 from three notices.
    for (let i = 0; i < 10; i++) fanout.touch('acme', 'r1');
    db.add('acme', 'r1', 3);
    fanout.touch('acme', 'r2');
    await settle();
    fanout.touch('acme', 'r3');
    fanout.touch('acme', 'r2');
    await settle();
    expect(db.reads).toHaveLength(1);
    release();
    await settle();
    // Fourteen touches, two reads: the one in flight, then one for all three runs.
    expect(db.reads.map((r) => r.runs)).toEqual([['acme/r1'], ['acme/r2', 'acme/r3', 'acme/r1']]);
    expect(db.reads[1].afters).toEqual([0, 0, 2]);
    streams.forEach((s) => expect(s.sent).toEqual([1, 2, 3]));
    others.forEach((s) => expect(s.sent).toEqual([1]));
    expect(fanout.reading).toBe(0);
  });

  it('never reads one run in two queries at once, even with reads to spare', async () => {
    const db = store();
    db.add('acme', 'r1', 1);
    db.add('acme', 'r2', 1);
    const fanout = new RunEventFanout(db.read, { concurrency: 4 });
    const one = sink(0);
    const two = sink(0);
    fanout.subscribe('acme', 'r1', one);
    fanout.subscribe('acme', 'r2', two);
    const release = db.hold();
    fanout.touch('acme', 'r1');
    await settle();
    fanout.touch('acme', 'r1');
    fanout.touch('acme', 'r2');
    await settle();
    // r2 is read beside r1's read in flight; r1 waits for its own.
    expect(db.reads.map((r) => r.runs)).toEqual([['acme/r1'], ['acme/r2']]);
    expect(fanout.reading).toBe(2);
    release();
    await settle();
    expect(db.reads.map((r) => r.runs)).toEqual([['acme/r1'], ['acme/r2'], ['acme/r1']]);
    expect(one.sent).toEqual([1]);
    expect(two.sent).toEqual([1]);
  });

  it('gives a stream that closes mid-read nothing, and the others on its run everything', async () => {
    const db = store();
    db.add('acme', 'r1', 1, 2);
    const fanout = new RunEventFanout(db.read);
    const staying = sink(0);
    const leaving = sink(0);
    fanout.subscribe('acme', 'r1', staying);
    const unsubscribe = fanout.subscribe('acme', 'r1', leaving);
    const release = db.hold();
    fanout.touch('acme', 'r1');
    await settle();
    unsubscribe();
    release();
    await settle();
    expect(staying.sent).toEqual([1, 2]);
    expect(leaving.sent).toEqual([]);
    expect(fanout.streams).toBe(1);
  });

  it('drops a run whose last stream closed mid-read: no read again, nothing delivered, a new stream starts afresh', async () => {
    const db = store();
    db.add('acme', 'r1', 1);
    const fanout = new RunEventFanout(db.read);
    const gone = sink(0);
    const unsubscribe = fanout.subscribe('acme', 'r1', gone);
    const release = db.hold();
    fanout.touch('acme', 'r1');
    await settle();
    fanout.touch('acme', 'r1');
    unsubscribe();
    release();
    await settle();
    expect(db.reads).toHaveLength(1);
    expect(gone.sent).toEqual([]);
    expect(fanout.streams).toBe(0);
    const fresh = sink(0);
    fanout.subscribe('acme', 'r1', fresh);
    fanout.touch('acme', 'r1');
    await settle();
    expect(fresh.sent).toEqual([1]);
  });

  it('pages through a long backlog; with many runs in one read each run gets a smaller page and is read again', async () => {
    const db = store();
    db.add('acme', 'r1', ...Array.from({ length: 25 }, (_, i) => i + 1));
    const fanout = new RunEventFanout(db.read, { page: 10 });
    const streams = [sink(0), sink(0)];
    streams.forEach((s) => fanout.subscribe('acme', 'r1', s));
    fanout.touch('acme', 'r1');
    await settle();
    expect(db.reads.map((r) => r.afters)).toEqual([[0], [10], [20]]);
    streams.forEach((s) => expect(s.sent).toHaveLength(25));

    const many = store();
    const wide = new RunEventFanout(many.read, { batchRows: 40 });
    const sinks = ['a', 'b', 'c', 'd'].map((r, i) => {
      many.add('acme', r, ...Array.from({ length: i === 0 ? 25 : 3 }, (_, k) => k + 1));
      const s = sink(0);
      wide.subscribe('acme', r, s);
      return s;
    });
    wide.touchAll();
    await settle();
    // 40 rows over 4 runs is 10 each; only `a` filled its page, so only `a` is read again.
    expect(many.reads.map((r) => [r.runs, r.limit])).toEqual([
      [['acme/a', 'acme/b', 'acme/c', 'acme/d'], 10],
      [['acme/a'], 40],
    ]);
    expect(sinks.map((s) => s.sent.length)).toEqual([25, 3, 3, 3]);
  });

  it('does not read a full page again when it moved no stream', async () => {
    const db = store();
    db.add('acme', 'r1', ...Array.from({ length: 30 }, (_, i) => i + 1));
    const fanout = new RunEventFanout(db.read, { page: 10 });
    // Its cursor stays at 0: it takes nothing it is handed.
    const stuck: RunStreamSink = { cursor: () => 0, deliver: () => undefined, wake: () => undefined, fail: () => undefined };
    fanout.subscribe('acme', 'r1', stuck);
    fanout.touch('acme', 'r1');
    await settle();
    expect(db.reads).toHaveLength(1);
  });

  it('wakes a stream still reading its backlog instead of reading for it, and hands a read in flight only to the streams it was made for', async () => {
    const db = store();
    db.add('acme', 'r1', 1, 2, 3);
    const fanout = new RunEventFanout(db.read);
    let woken = 0;
    const catchingUp: RunStreamSink = { cursor: () => undefined, deliver: () => fail('delivered while catching up'), wake: () => void woken++, fail: () => undefined };
    fanout.subscribe('acme', 'r1', catchingUp);
    fanout.touch('acme', 'r1');
    await settle();
    expect(woken).toBe(1);
    expect(db.reads).toEqual([]);

    // A stream joins (caught up to 2) while a read from 0 is in flight for another: that read is not its.
    const early = sink(0);
    fanout.subscribe('acme', 'r1', early);
    const release = db.hold();
    fanout.touch('acme', 'r1');
    await settle();
    const late = sink(2);
    fanout.subscribe('acme', 'r1', late);
    release();
    await settle();
    expect(early.sent).toEqual([1, 2, 3]);
    expect(late.sent).toEqual([]);
    expect(late.gaps).toBe(0);
    expect(woken).toBe(2);
  });

  it('tells the read when its starting seq is known to be applied (a stream at it sent it), so the run\'s bound need not be looked up', async () => {
    const db = store();
    const fanout = new RunEventFanout(db.read);
    // a: the lowest stream's cursor is applied; b: the lowest only claimed, though another is applied;
    // c: a claimed cursor equal to an applied one's.
    db.add('acme', 'a', 1, 2, 3);
    db.add('acme', 'b', 1, 2, 3);
    db.add('acme', 'c', 1, 2, 3);
    fanout.subscribe('acme', 'a', sink(1));
    fanout.subscribe('acme', 'a', sink(2, { claimed: true }));
    const claimed = sink(1, { claimed: true });
    fanout.subscribe('acme', 'b', claimed);
    fanout.subscribe('acme', 'b', sink(2));
    fanout.subscribe('acme', 'c', sink(2, { claimed: true }));
    fanout.subscribe('acme', 'c', sink(2));
    fanout.touchAll();
    await settle();
    expect(db.reads[0].afters).toEqual([1, 1, 2]);
    expect(db.applied[0]).toEqual([true, false, true]);
    expect(claimed.sent).toEqual([2, 3]);
    // Once it has sent a seq, the claimed stream's cursor is one the read model applied.
    db.add('acme', 'b', 4);
    fanout.touch('acme', 'b');
    await settle();
    expect(db.reads[1]).toEqual({ runs: ['acme/b'], afters: [3], limit: 500 });
    expect(db.applied[1]).toEqual([true]);
  });

  it('hands each run its events as soon as its rows are in, before the read is over; a run handed and touched again is read again after', async () => {
    const db = store();
    const fanout = new RunEventFanout(db.read);
    const order: string[] = [];
    const streams = ['a', 'b', 'c'].map((r) => {
      db.add('acme', r, 1);
      const s = sink(0);
      fanout.subscribe('acme', r, s);
      return s;
    });
    db.onHanded = (i) => {
      order.push(`handed ${i}: ${streams.map((s) => s.sent.length).join('')}`);
      // Touched after its rows were handed, while the read still hands the others: read once more after.
      if (i === 0 && db.reads.length === 1) {
        db.add('acme', 'a', 2);
        fanout.touch('acme', 'a');
      }
    };
    fanout.touchAll();
    await settle();
    // Each stream had its frames when its own run was handed, not when the whole read ended.
    expect(order.slice(0, 3)).toEqual(['handed 0: 100', 'handed 1: 110', 'handed 2: 111']);
    expect(db.reads.map((r) => [r.runs, r.afters])).toEqual([
      [['acme/a', 'acme/b', 'acme/c'], [0, 0, 0]],
      [['acme/a'], [1]],
    ]);
    expect(streams.map((s) => s.sent)).toEqual([[1, 2], [1], [1]]);
  });

  it('fails, of a read that fails part-way, only the runs it had not handed yet', async () => {
    const db = store();
    const fanout = new RunEventFanout(db.read);
    const streams = ['a', 'b', 'c'].map((r) => {
      db.add('acme', r, 1);
      const s = sink(0);
      fanout.subscribe('acme', r, s);
      return s;
    });
    db.failNext = new Error('terminating connection due to administrator command');
    db.failAfter = 1;
    fanout.touchAll();
    await settle();
    expect(streams.map((s) => s.sent)).toEqual([[1], [], []]);
    expect(streams.map((s) => s.failures.length)).toEqual([0, 1, 1]);
    expect(fanout.reading).toBe(0);
  });

  it('hands a failed read to every stream it was for, and reads again at the next touch', async () => {
    const db = store();
    db.add('acme', 'r1', 1);
    db.add('acme', 'r2', 1);
    const fanout = new RunEventFanout(db.read);
    const streams = [sink(0), sink(0)];
    streams.forEach((s) => fanout.subscribe('acme', 'r1', s));
    const other = sink(0);
    fanout.subscribe('acme', 'r2', other);
    db.failNext = new Error('canceling statement due to statement timeout');
    fanout.touch('acme', 'r1');
    fanout.touch('acme', 'r2');
    await settle();
    for (const s of [...streams, other]) {
      expect(s.failures.map((e) => (e as Error).message)).toEqual(['canceling statement due to statement timeout']);
      expect(s.sent).toEqual([]);
    }
    expect(fanout.reading).toBe(0);
    const next = sink(0);
    fanout.subscribe('acme', 'r2', next);
    fanout.touch('acme', 'r2');
    await settle();
    expect(next.sent).toEqual([1]);
  });
});
