import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { LocalObjectStore } from './local-object-store';
import { concatParts, firstLine, SegmentUnreadable, segmentChain, trajectoryParts, type SegmentedLog } from './segments';

const log: SegmentedLog = { keyOf: (lastSeq) => `acme/run-1/trajectory/to-${String(lastSeq).padStart(12, '0')}.jsonl` };
const lines = (from: number, to: number): string => {
  let out = '';
  for (let seq = from; seq <= to; seq += 1) out += JSON.stringify({ seq, type: 'step_completed', payload: { step: seq } }) + '\n';
  return out;
};

describe('trajectory segments', () => {
  let root: string;
  let store: LocalObjectStore;
  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'segments-'));
    store = new LocalObjectStore(root);
  });
  afterEach(() => rm(root, { recursive: true, force: true }));

  /** Writes the segments a series of captures ending at these seqs would have written. */
  const series = async (ends: number[]): Promise<void> => {
    let previous = 0;
    for (const end of ends) {
      await store.put(log.keyOf(end), Buffer.from(lines(previous + 1, end)));
      previous = end;
    }
  };
  const read = async (lastSeq: number): Promise<string> => (await buffer(concatParts(store, await segmentChain(store, log, lastSeq)))).toString();

  it('reads any capture of a series back as exactly the events 1..its last seq, from its segments alone', async () => {
    await series([3, 4, 9, 20]);
    expect(await read(20)).toBe(lines(1, 20));
    expect(await read(9)).toBe(lines(1, 9));
    expect(await read(4)).toBe(lines(1, 4));
    expect(await read(3)).toBe(lines(1, 3));
    expect((await segmentChain(store, log, 9)).map((p) => p.key)).toEqual([log.keyOf(3), log.keyOf(4), log.keyOf(9)]);
    expect((await segmentChain(store, log, 9)).reduce((n, p) => n + p.bytes, 0)).toBe(Buffer.byteLength(lines(1, 9)));
  });

  it('a trajectory with no events yet is empty, read without touching the store', async () => {
    expect(await segmentChain(store, log, 0)).toEqual([]);
    expect(await read(0)).toBe('');
  });

  it('a segment that is gone, empty, or not what its name says is a SegmentUnreadable naming it, never a wrong trajectory', async () => {
    await series([3, 9]);
    await store.delete(log.keyOf(3));
    await expect(segmentChain(store, log, 9)).rejects.toThrow(new SegmentUnreadable(log.keyOf(3), 'is not in the object store'));
    await store.put(log.keyOf(3), Buffer.from(''));
    await expect(segmentChain(store, log, 9)).rejects.toBeInstanceOf(SegmentUnreadable);
    // Starts past its own end: walking back from it would never reach seq 1.
    await store.put(log.keyOf(3), Buffer.from(lines(5, 5)));
    await expect(segmentChain(store, log, 9)).rejects.toThrow(/starts at seq 5, not within 1\.\.3/);
    await store.put(log.keyOf(3), Buffer.from('not json\n'));
    await expect(segmentChain(store, log, 9)).rejects.toThrow(/no readable first record/);
  });

  it('reads only the first line of a segment to chain it', async () => {
    const big = Readable.from([Buffer.from('{"seq":1}\n'), Buffer.alloc(1 << 20, 0x61)]);
    expect(await firstLine(big)).toBe('{"seq":1}');
    expect(big.destroyed).toBe(true);
  });

  it('a snapshot from before segments is read as its one whole object', async () => {
    await store.put('acme/run-1/snapshots/snap-0001/trajectory.jsonl', Buffer.from(lines(1, 7)));
    const parts = await trajectoryParts(store, { log, wholeKey: 'acme/run-1/snapshots/snap-0001/trajectory.jsonl' });
    expect(parts).toEqual([{ key: 'acme/run-1/snapshots/snap-0001/trajectory.jsonl', bytes: Buffer.byteLength(lines(1, 7)) }]);
    expect((await buffer(concatParts(store, parts))).toString()).toBe(lines(1, 7));
    await expect(trajectoryParts(store, { log, wholeKey: 'acme/run-1/snapshots/snap-0002/trajectory.jsonl' })).rejects.toBeInstanceOf(SegmentUnreadable);
    await series([2, 5]);
    expect((await buffer(concatParts(store, await trajectoryParts(store, { log, lastSeq: 5, wholeKey: 'unused' })))).toString()).toBe(lines(1, 5));
  });

  it('a part that vanishes mid-read ends the stream with an error, not a short trajectory', async () => {
    await series([3, 9]);
    const parts = await segmentChain(store, log, 9);
    await store.delete(log.keyOf(9));
    await expect(buffer(concatParts(store, parts))).rejects.toThrow(/no object/);
  });
});
