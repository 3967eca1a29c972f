import { pipeline, type Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { ArchiveRefused } from './refusal';
import { BLOCK, HeaderError, decodeHeader, isZeroBlock, padding, parsePaxRecords, readString } from './tar-header';

/**
 * Most pax and GNU long-name data we read for one entry, all its headers together: what applies to an
 * entry is held in memory until the entry comes, so this bounds that memory (a flood of headers before
 * one entry is refused at the cap, not accumulated). Real ones are a few hundred bytes; a long path or
 * link target a few KiB; extended attributes rarely more than 64 KiB.
 */
const MAX_ENTRY_META_BYTES = 1024 * 1024;
/**
 * Most pax and GNU long-name data we read in the whole archive, so the work of parsing it stays bounded
 * too. GNU tar --format=posix writes about 100 bytes for every entry (mtime, atime, ctime), so even the
 * default maxEntries of 100,000 uses a sixth of it.
 */
const MAX_TOTAL_META_BYTES = 64 * 1024 * 1024;
/** Slack allowed past the end-of-archive blocks: tar writers pad to their record size (GNU: 10 KiB). */
const MAX_TRAILING_BYTES = 16 * 1024 * 1024;

/** One entry's header, as the archive has it (pax and GNU long names applied over the ustar fields). */
export interface TarEntry {
  name: string;
  linkname: string;
  /** Bytes of data that follow the header. */
  size: number;
  /** Whole seconds since the epoch. */
  mtime: number;
  mode: number;
  typeflag: string;
}

export interface TarReaderLimits {
  /** Entries of any kind. */
  maxEntries: number;
  /** Bytes of tar stream (headers, data and padding) read in all, past which the archive is refused. */
  maxStreamBytes: number;
}

/**
 * A gzip'd tar (ours or any: GNU, pax, ustar) read entry by entry as it streams, never held whole:
 * `next()` gives each entry's header, `data()` its bytes (what a caller does not read is skipped at the
 * next `next()`), and `end()` reads to the end so gunzip checks its trailer. Metadata headers (pax,
 * GNU long names) are applied to the entry they describe and bounded; a bad checksum, a truncated
 * stream or too much of anything is an `ArchiveRefused` naming the entry being read.
 */
export class TarReader {
  /** The entry being read, for error messages. */
  entry = '';
  private readonly tar: Readable;
  private readonly input: BlockInput;
  private entries = 0;
  /** Data of the current entry not read yet, and its padding. */
  private unread = 0;
  private unreadPadding = 0;
  private entryMetaBytes = 0;
  private totalMetaBytes = 0;

  constructor(
    source: Readable,
    private readonly limits: TarReaderLimits,
  ) {
    // The pipeline forwards an error of `source` (a dropped S3 download, say) to the reads below.
    this.tar = pipeline(source, createGunzip({ chunkSize: 1024 * 1024 }), () => {});
    this.input = new BlockInput(this.tar[Symbol.asyncIterator]() as AsyncIterator<Buffer>, limits.maxStreamBytes + MAX_TRAILING_BYTES, () => this.entry);
  }

  /** The next entry's header, after skipping what is left of the current one; undefined at the end-of-archive blocks. */
  async next(): Promise<TarEntry | undefined> {
    await this.input.skip(this.unread + this.unreadPadding);
    this.unread = this.unreadPadding = 0;
    let pax = new Map<string, string>();
    let longName: string | undefined;
    let longLink: string | undefined;
    for (;;) {
      const block = await this.input.exact(BLOCK);
      if (block === undefined) throw new ArchiveRefused('corrupt', this.entry, 'archive ends without its end-of-archive blocks');
      if (isZeroBlock(block)) return undefined;
      const header = decodeHeader(block);
      // Headers that describe the next entry rather than being one.
      if (header.typeflag === 'x') {
        for (const [k, v] of parsePaxRecords(await this.meta(header.size))) pax.set(k, v);
        continue;
      }
      if (header.typeflag === 'g') {
        // Global pax defaults (charset, comment, ...): nothing in them changes what an entry is.
        await this.meta(header.size);
        continue;
      }
      if (header.typeflag === 'L' || header.typeflag === 'K') {
        const data = await this.meta(header.size);
        const value = readString(data, 0, data.length);
        if (header.typeflag === 'L') longName = value;
        else longLink = value;
        continue;
      }
      const name = pax.get('path') ?? longName ?? header.name;
      const entry: TarEntry = {
        name,
        linkname: pax.get('linkpath') ?? longLink ?? header.linkname,
        size: pax.has('size') ? paxInteger(pax.get('size')!, 'size', name) : header.size,
        mtime: pax.has('mtime') ? paxMtime(pax.get('mtime')!, name) : header.mtime,
        mode: header.mode,
        typeflag: header.typeflag,
      };
      pax = new Map();
      this.entryMetaBytes = 0;
      this.entry = name;
      if (++this.entries > this.limits.maxEntries) throw new ArchiveRefused('too_many_entries', name, `more than ${this.limits.maxEntries} entries`);
      this.unread = entry.size;
      this.unreadPadding = padding(entry.size);
      return entry;
    }
  }

  /** The current entry's data as it streams (what is left of it), then its padding is skipped. */
  async *data(): AsyncGenerator<Buffer> {
    while (this.unread > 0) {
      const chunk = await this.input.some(this.unread);
      if (chunk === undefined) throw this.input.truncated();
      this.unread -= chunk.length;
      yield chunk;
    }
    await this.input.skip(this.unreadPadding);
    this.unreadPadding = 0;
  }

  /** Reads to the end of the stream, so gunzip checks the CRC and length in its trailer. */
  async end(): Promise<void> {
    while ((await this.input.some(BLOCK * 128)) !== undefined);
  }

  /** Stops reading: the source is closed. */
  close(): void {
    this.tar.destroy();
  }

  /** Decompression failures and malformed headers are a corrupt archive; anything else (I/O, the source) is itself. */
  refusalOf(err: unknown): unknown {
    if (err instanceof ArchiveRefused) return err;
    if (err instanceof HeaderError) return new ArchiveRefused('corrupt', this.entry, err.message);
    const code = (err as NodeJS.ErrnoException).code;
    if (typeof code === 'string' && code.startsWith('Z_')) return new ArchiveRefused('corrupt', this.entry, `gzip: ${(err as Error).message}`);
    return err;
  }

  /** One metadata header's data, checked against both caps before any of it is read. */
  private async meta(size: number): Promise<Buffer> {
    if (this.entryMetaBytes + size > MAX_ENTRY_META_BYTES) {
      throw new ArchiveRefused('too_much_metadata', this.entry, `extended header of ${size} bytes after ${this.entryMetaBytes} for the same entry; at most ${MAX_ENTRY_META_BYTES} per entry`);
    }
    if (this.totalMetaBytes + size > MAX_TOTAL_META_BYTES) {
      throw new ArchiveRefused('too_much_metadata', this.entry, `more than ${MAX_TOTAL_META_BYTES} bytes of extended headers in the archive`);
    }
    this.entryMetaBytes += size;
    this.totalMetaBytes += size;
    const data = size === 0 ? Buffer.alloc(0) : await this.input.exact(size);
    if (data === undefined) throw this.input.truncated();
    await this.input.skip(padding(size));
    return data;
  }
}

/** Pulls the decompressed tar stream in blocks and slices without copying where it can. */
class BlockInput {
  private chunk: Buffer = Buffer.alloc(0);
  private pos = 0;
  private total = 0;

  constructor(
    private readonly iterator: AsyncIterator<Buffer>,
    private readonly budget: number,
    private readonly entry: () => string,
  ) {}

  /** Up to `max` bytes as they arrive; undefined at the end of the stream. */
  async some(max: number): Promise<Buffer | undefined> {
    while (this.pos >= this.chunk.length) {
      const next = await this.iterator.next();
      if (next.done) return undefined;
      this.chunk = next.value;
      this.pos = 0;
      this.total += next.value.length;
      if (this.total > this.budget) throw new ArchiveRefused('too_large', this.entry(), `more than ${this.budget} bytes of tar stream`);
    }
    const n = Math.min(max, this.chunk.length - this.pos);
    const out = this.chunk.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }

  /** Exactly `n` bytes; undefined when the stream ends before the first of them. */
  async exact(n: number): Promise<Buffer | undefined> {
    const first = await this.some(n);
    if (first === undefined || first.length === n) return first;
    const parts = [first];
    for (let have = first.length; have < n; ) {
      const part = await this.some(n - have);
      if (part === undefined) throw this.truncated();
      parts.push(part);
      have += part.length;
    }
    return Buffer.concat(parts, n);
  }

  async skip(n: number): Promise<void> {
    for (let left = n; left > 0; ) {
      const part = await this.some(left);
      if (part === undefined) throw this.truncated();
      left -= part.length;
    }
  }

  truncated(): ArchiveRefused {
    return new ArchiveRefused('corrupt', this.entry(), 'archive is truncated');
  }
}

function paxInteger(value: string, what: string, name: string): number {
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(Number(value))) throw new ArchiveRefused('corrupt', name, `bad pax ${what} '${value}'`);
  return Number(value);
}

function paxMtime(value: string, name: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n)) throw new ArchiveRefused('corrupt', name, `bad pax mtime '${value}'`);
  return Math.floor(n);
}

/** What a tar typeflag makes an entry; `other` is anything else (GNU sparse or volume headers, say). */
export type TarEntryType = 'file' | 'hardlink' | 'symlink' | 'dir' | 'device' | 'fifo' | 'other';

export function entryTypeOf(typeflag: string): TarEntryType {
  switch (typeflag) {
    case '0':
    case '\0':
    case '7': // contiguous file: a regular file everywhere that matters
      return 'file';
    case '1':
      return 'hardlink';
    case '2':
      return 'symlink';
    case '5':
      return 'dir';
    case '3':
    case '4':
      return 'device';
    case '6':
      return 'fifo';
    default:
      return 'other';
  }
}
