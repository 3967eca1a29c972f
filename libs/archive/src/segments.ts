import { Readable } from 'node:stream';
import { ObjectNotFound, type ObjectStore } from './object-store';

/**
 * A JSON-lines log stored as segments: each segment holds the records after the previous one, and is
 * found by the seq of its last record (`keyOf(lastSeq)`). Its first record's `seq` says where the
 * segment before it ends, so the whole log up to any segment is read by walking back from that
 * segment alone: no index object, no listing, nothing another writer could leave stale.
 */
export interface SegmentedLog {
  keyOf(lastSeq: number): string;
}

export interface LogPart {
  key: string;
  bytes: number;
}

/** A segment the chain needs is not there, or is not what its name says. */
export class SegmentUnreadable extends Error {
  constructor(
    readonly key: string,
    why: string,
  ) {
    super(`trajectory segment '${key}' ${why}`);
    this.name = 'SegmentUnreadable';
  }
}

/** A first line longer than this is not a record we wrote. */
const MAX_FIRST_LINE = 8 * 1024 * 1024;

/** The first line of an object, reading no further than its end (bounded, whatever the object's size). */
export async function firstLine(stream: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of stream) {
      const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string);
      const nl = buf.indexOf(0x0a);
      if (nl >= 0) {
        chunks.push(buf.subarray(0, nl));
        break;
      }
      chunks.push(buf);
      size += buf.length;
      if (size > MAX_FIRST_LINE) throw new Error(`its first line is longer than ${MAX_FIRST_LINE} bytes`);
    }
  } finally {
    stream.destroy();
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * The parts, oldest first, that make up the log's records 1..`lastSeq`. Each step back goes strictly
 * down in seq, so a damaged segment ends the walk with an error rather than a loop.
 */
export async function segmentChain(store: ObjectStore, log: SegmentedLog, lastSeq: number): Promise<LogPart[]> {
  const parts: LogPart[] = [];
  let end = lastSeq;
  while (end > 0) {
    const key = log.keyOf(end);
    const stat = await store.stat(key);
    if (!stat) throw new SegmentUnreadable(key, 'is not in the object store');
    let first: number;
    try {
      const line = await firstLine(await store.get(key));
      first = (JSON.parse(line) as { seq?: unknown }).seq as number;
    } catch (err) {
      if (err instanceof ObjectNotFound) throw new SegmentUnreadable(key, 'is not in the object store');
      throw new SegmentUnreadable(key, `has no readable first record: ${(err as Error).message}`);
    }
    if (!Number.isInteger(first) || first < 1 || first > end) throw new SegmentUnreadable(key, `starts at seq ${String(first)}, not within 1..${end}`);
    parts.push({ key, bytes: stat.bytes });
    end = first - 1;
  }
  return parts.reverse();
}

/**
 * The parts one after another as one stream, each read only when the one before it is done; a part
 * that cannot be read ends the stream with that error, and destroying the stream stops the read.
 */
export function concatParts(store: ObjectStore, parts: readonly LogPart[]): Readable {
  return Readable.from(
    (async function* () {
      for (const part of parts) yield* await store.get(part.key);
    })(),
    { objectMode: false },
  );
}

/**
 * What a snapshot's trajectory is made of. `lastSeq` set: the segments up to it. Absent (a snapshot
 * written before segments): its one whole-trajectory object, read as it always was.
 */
export async function trajectoryParts(store: ObjectStore, options: { log: SegmentedLog; lastSeq?: number; wholeKey: string }): Promise<LogPart[]> {
  if (options.lastSeq !== undefined) return segmentChain(store, options.log, options.lastSeq);
  const stat = await store.stat(options.wholeKey);
  if (!stat) throw new SegmentUnreadable(options.wholeKey, 'is not in the object store');
  return [{ key: options.wholeKey, bytes: stat.bytes }];
}
