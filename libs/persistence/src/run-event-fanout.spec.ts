import type { RunEventEnvelope } from '@agentrun/contracts';
import { RunEventFanout, type RunStreamSink } from './run-event-fanout';

function event(seq: number): RunEventEnvelope {
  return { org: 'acme', run_id: 'r1', seq, type: 'step_completed', ts: '2026-01-01T00:00:00.000Z', payload: {} } as unknown as RunEventEnvelope;
}

/** A run's stored events and a count of the queries made against them. */
function store(count: number) {
  const events = Array.from({ length: count }, (_, i) => event(i + 1));
  const reads: number[] = [];
  let gate: Promise<void> = Promise.resolve();
  return {
    events,
    reads,
    hold(): () => void {
      let release!: () => void;
      gate = new Promise((r) => (release = r));
      return release;
    },
    read: async (_org: string, _run: string, after: number, limit: number) => {
      reads.push(after);
      await gate;
      return events.filter((e) => e.seq > after).slice(0, limit);
    },
  };
}

/** A stream that has caught up to `from` and sends what it is handed past its cursor. */
function sink(from: number) {
  const sent: number[] = [];
  let last = from;
  const s: RunStreamSink & { sent: number[]; gaps: number } = {
    sent,
    gaps: 0,
    cursor: () => last,
    deliver(events, after) {
      if (after > last) {
        s.gaps++;
        return;
      }
      for (const e of events) {
        if (e.seq <= last) continue;
        sent.push(e.seq);
        last = e.seq;
      }
    },
    wake: () => undefined,
    fail: (err) => {
      throw err;
    },
  };
  return s;
}

const settle = () => new Promise((r) => setImmediate(r));

describe('RunEventFanout', () => {
  it('reads a touched run once for any number of streams on it, each getting every event past its own cursor', async () => {
    for (const n of [1, 5, 50]) {
      const db = store(3);
      const fanout = new RunEventFanout(db.read);
      const sinks = Array.from({ length: n }, (_, i) => sink(i % 3));
      sinks.forEach((s) => fanout.subscribe('acme', 'r1', s));
      db.events.push(event(4));
      fanout.touch('acme', 'r1');
      await settle();
      expect(db.reads).toEqual([0]);
      sinks.forEach((s, i) => expect(s.sent).toEqual([1, 2, 3, 4].slice(i % 3)));
      expect(fanout.streams).toBe(n);
    }
  });

  it('folds touches during a read into one more read, and leaves other runs alone', async () => {
    const db = store(2);
    const fanout = new RunEventFanout(db.read);
    const streams = [sink(0), sink(0), sink(0)];
    streams.forEach((s) => fanout.subscribe('acme', 'r1', s));
    const other = sink(0);
    fanout.subscribe('acme', 'r2', other);
    const release = db.hold();
    fanout.touch('acme', 'r1');
    for (let i = 0; i < 10; i++) fanout.touch('acme', 'r1');
    db.events.push(event(3));
    release();
    await settle();
    await settle();
    // Eleven touches, two reads: the one in flight and one after it.
    expect(db.reads).toEqual([0, 3]);
    streams.forEach((s) => expect(s.sent).toEqual([1, 2, 3]));
    expect(other.sent).toEqual([]);
  });

  it('pages through a long backlog with one read per page', async () => {
    const db = store(25);
    const fanout = new RunEventFanout(db.read, 10);
    const streams = [sink(0), sink(0)];
    streams.forEach((s) => fanout.subscribe('acme', 'r1', s));
    fanout.touch('acme', 'r1');
    await settle();
    await settle();
    expect(db.reads).toEqual([0, 10, 20]);
    streams.forEach((s) => expect(s.sent).toHaveLength(25));
  });

  it('wakes a stream still reading its backlog instead of reading for it; a closed stream gets nothing', async () => {
    const db = store(1);
    const fanout = new RunEventFanout(db.read);
    const woken: number[] = [];
    const catchingUp: RunStreamSink = { cursor: () => undefined, deliver: () => fail('delivered while catching up'), wake: () => woken.push(1), fail: () => undefined };
    fanout.subscribe('acme', 'r1', catchingUp);
    const gone = sink(0);
    fanout.subscribe('acme', 'r1', gone)();
    fanout.touch('acme', 'r1');
    await settle();
    expect(woken).toEqual([1]);
    expect(db.reads).toEqual([]);
    expect(gone.sent).toEqual([]);
  });

  it('hands a failed read to every stream on the run', async () => {
    const fanout = new RunEventFanout(async () => Promise.reject(new Error('canceling statement due to statement timeout')));
    const failures: string[] = [];
    for (let i = 0; i < 3; i++) fanout.subscribe('acme', 'r1', { ...sink(0), fail: (err) => failures.push((err as Error).message) });
    fanout.touch('acme', 'r1');
    await settle();
    expect(failures).toHaveLength(3);
  });
});
