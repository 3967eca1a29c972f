import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { link, lstat, lutimes, mkdir, open, readdir, rename, rm, symlink, unlink, chmod, utimes } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { pipeline, type Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { BLOCK, HeaderError, decodeHeader, isZeroBlock, padding, parsePaxRecords, readString } from './tar-header';

export type RefusalReason =
  | 'absolute_path'
  | 'path_escape'
  | 'link_escape'
  | 'through_link'
  | 'device_file'
  | 'setuid'
  | 'too_large'
  | 'too_many_entries'
  | 'too_much_metadata'
  | 'corrupt'
  | 'unsupported_entry';

/** An archive we will not restore, with a machine-readable reason and the entry that caused it. */
export class ArchiveRefused extends Error {
  constructor(
    readonly reason: RefusalReason,
    readonly entry: string,
    detail: string,
  ) {
    super(`archive refused (${reason})${entry ? ` at '${entry}'` : ''}: ${detail}`);
    this.name = 'ArchiveRefused';
  }
}

export interface RestoreOptions {
  /** Total bytes of file data; default 2 GiB. */
  maxBytes?: number;
  /** Entries of any kind; default 100,000. */
  maxEntries?: number;
}

export interface RestoreSummary {
  /** Regular files, hard links included. */
  files: number;
  dirs: number;
  symlinks: number;
  /** File data written. */
  bytes: number;
}

export const DEFAULT_RESTORE_MAX_BYTES = 2 * 1024 ** 3;
export const DEFAULT_RESTORE_MAX_ENTRIES = 100_000;

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

/**
 * Restores a .tar.gz (ours or any gzip'd tar: GNU, pax, ustar) into `targetDir`, which must be absent
 * or empty. Everything is written into a fresh sibling directory first and renamed onto `targetDir`
 * only once the whole archive was read, its gzip CRC checked and every entry accepted: a refused or
 * broken archive leaves nothing behind, neither in `targetDir` nor outside it.
 *
 * Refused (ArchiveRefused, see RefusalReason): absolute names, `..` in a name, a symbolic link that
 * could point outside the tree, an entry beneath a symbolic link the archive made, device files and
 * fifos, setuid/setgid modes, more than `maxBytes` of data or `maxEntries` entries, more pax/long-name
 * metadata than an entry or an archive needs, a bad checksum or a truncated stream, and entry kinds we
 * do not restore. Owners are never applied; modes keep the permission bits only; mtimes are kept
 * (directories' once their contents are written).
 */
export async function restoreArchive(source: Readable, targetDir: string, options: RestoreOptions = {}): Promise<RestoreSummary> {
  const limits = {
    maxBytes: options.maxBytes ?? DEFAULT_RESTORE_MAX_BYTES,
    maxEntries: options.maxEntries ?? DEFAULT_RESTORE_MAX_ENTRIES,
  };
  const target = resolve(targetDir);
  await assertEmptyOrAbsent(target);
  await mkdir(dirname(target), { recursive: true });
  const staging = join(dirname(target), `.${basename(target)}.restore-${randomBytes(6).toString('hex')}`);
  await mkdir(staging);

  // The pipeline forwards an error of `source` (a dropped S3 download, say) to the iteration below.
  const tar = pipeline(source, createGunzip({ chunkSize: 1024 * 1024 }), () => {});
  const iterator = tar[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  // Headers and padding stay well under 4 KiB per entry; past this budget the stream is not a tar we want.
  const input = new TarInput(iterator, limits.maxBytes + limits.maxEntries * 4096 + MAX_TRAILING_BYTES);
  try {
    const summary = await new Extraction(staging, input, limits).run();
    await moveInto(staging, target);
    return summary;
  } catch (err) {
    tar.destroy();
    await rm(staging, { recursive: true, force: true }).catch(() => undefined);
    throw asRefusal(err, input.entry);
  }
}

/** Decompression failures and malformed headers are a corrupt archive; anything else (I/O, the source) is itself. */
function asRefusal(err: unknown, entry: string): unknown {
  if (err instanceof ArchiveRefused) return err;
  if (err instanceof HeaderError) return new ArchiveRefused('corrupt', entry, err.message);
  const code = (err as NodeJS.ErrnoException).code;
  if (typeof code === 'string' && code.startsWith('Z_')) return new ArchiveRefused('corrupt', entry, `gzip: ${(err as Error).message}`);
  return err;
}

async function assertEmptyOrAbsent(target: string): Promise<void> {
  let names: string[];
  try {
    names = await readdir(target);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  if (names.length > 0) throw new Error(`restore target ${target} is not empty`);
}

async function moveInto(staging: string, target: string): Promise<void> {
  try {
    // rename(2) replaces an empty directory, so an empty target is taken over as it is.
    await rename(staging, target);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOTEMPTY' || code === 'EEXIST') throw new Error(`restore target ${target} was filled while restoring`);
    throw err;
  }
}

/** Pulls the decompressed tar stream in blocks and slices without copying where it can. */
class TarInput {
  /** The entry being read, for error messages. */
  entry = '';
  private chunk: Buffer = Buffer.alloc(0);
  private pos = 0;
  private total = 0;

  constructor(
    private readonly iterator: AsyncIterator<Buffer>,
    private readonly budget: number,
  ) {}

  /** Up to `max` bytes as they arrive; undefined at the end of the stream. */
  async some(max: number): Promise<Buffer | undefined> {
    while (this.pos >= this.chunk.length) {
      const next = await this.iterator.next();
      if (next.done) return undefined;
      this.chunk = next.value;
      this.pos = 0;
      this.total += next.value.length;
      if (this.total > this.budget) throw new ArchiveRefused('too_large', this.entry, `more than ${this.budget} bytes of tar stream`);
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
    return new ArchiveRefused('corrupt', this.entry, 'archive is truncated');
  }
}

type Kind = 'file' | 'dir' | 'symlink';

interface PendingMeta {
  pax: Map<string, string>;
  longName?: string;
  longLink?: string;
}

class Extraction {
  private readonly summary: RestoreSummary = { files: 0, dirs: 0, symlinks: 0, bytes: 0 };
  private entries = 0;
  /** What this restore put at each path (relative, `/`-joined). */
  private readonly kinds = new Map<string, Kind>();
  /** Directories' final mode and mtime, applied once everything beneath them is written. */
  private readonly dirAttributes = new Map<string, { mode: number; mtime: number }>();
  private readonly madeDirs = new Set<string>(['']);
  /** Metadata header bytes read since the last entry, and in the whole archive. */
  private entryMetaBytes = 0;
  private totalMetaBytes = 0;

  constructor(
    private readonly root: string,
    private readonly input: TarInput,
    private readonly limits: Required<RestoreOptions>,
  ) {}

  async run(): Promise<RestoreSummary> {
    let meta: PendingMeta = { pax: new Map() };
    for (;;) {
      const block = await this.input.exact(BLOCK);
      if (block === undefined) throw new ArchiveRefused('corrupt', this.input.entry, 'archive ends without its end-of-archive blocks');
      if (isZeroBlock(block)) break;
      const header = decodeHeader(block);

      // Headers that describe the next entry rather than being one.
      if (header.typeflag === 'x') {
        for (const [k, v] of parsePaxRecords(await this.meta(header.size))) meta.pax.set(k, v);
        continue;
      }
      if (header.typeflag === 'g') {
        // Global pax defaults (charset, comment, ...): nothing in them changes how we restore.
        await this.meta(header.size);
        continue;
      }
      if (header.typeflag === 'L' || header.typeflag === 'K') {
        const data = await this.meta(header.size);
        const value = readString(data, 0, data.length);
        if (header.typeflag === 'L') meta.longName = value;
        else meta.longLink = value;
        continue;
      }

      const name = meta.pax.get('path') ?? meta.longName ?? header.name;
      const linkname = meta.pax.get('linkpath') ?? meta.longLink ?? header.linkname;
      const size = meta.pax.has('size') ? paxInteger(meta.pax.get('size')!, 'size', name) : header.size;
      const mtime = meta.pax.has('mtime') ? paxMtime(meta.pax.get('mtime')!, name) : header.mtime;
      meta = { pax: new Map() };
      this.entryMetaBytes = 0;
      this.input.entry = name;

      if (++this.entries > this.limits.maxEntries) {
        throw new ArchiveRefused('too_many_entries', name, `more than ${this.limits.maxEntries} entries`);
      }
      await this.entry({ name, linkname, size, mtime, mode: header.mode, typeflag: header.typeflag });
    }
    // Read to the end so gunzip checks the CRC and length in its trailer before anything is kept.
    while ((await this.input.some(BLOCK * 128)) !== undefined);
    await this.applyDirectoryAttributes();
    return this.summary;
  }

  /** One metadata header's data, checked against both caps before any of it is read. */
  private async meta(size: number): Promise<Buffer> {
    if (this.entryMetaBytes + size > MAX_ENTRY_META_BYTES) {
      throw new ArchiveRefused(
        'too_much_metadata',
        this.input.entry,
        `extended header of ${size} bytes after ${this.entryMetaBytes} for the same entry; at most ${MAX_ENTRY_META_BYTES} per entry`,
      );
    }
    if (this.totalMetaBytes + size > MAX_TOTAL_META_BYTES) {
      throw new ArchiveRefused('too_much_metadata', this.input.entry, `more than ${MAX_TOTAL_META_BYTES} bytes of extended headers in the archive`);
    }
    this.entryMetaBytes += size;
    this.totalMetaBytes += size;
    const data = size === 0 ? Buffer.alloc(0) : await this.input.exact(size);
    if (data === undefined) throw this.input.truncated();
    await this.input.skip(padding(size));
    return data;
  }

  private async entry(e: { name: string; linkname: string; size: number; mtime: number; mode: number; typeflag: string }): Promise<void> {
    const { name, typeflag } = e;
    const kind = kindOf(typeflag, name);
    if (e.mode & 0o6000) throw new ArchiveRefused('setuid', name, `mode ${(e.mode & 0o7777).toString(8)} has setuid/setgid`);
    const parts = this.pathOf(name);
    const path = parts.join('/');

    if (path === '') {
      // `./` itself (GNU tar -C dir .): its mode and mtime become the target's.
      if (kind !== 'dir') throw new ArchiveRefused('unsupported_entry', name, 'a non-directory entry names the archive root');
      this.dirAttributes.set('', { mode: e.mode & 0o777, mtime: e.mtime });
      return this.input.skip(e.size + padding(e.size));
    }
    this.checkParents(parts, name);
    const full = join(this.root, ...parts);
    await this.makeParent(parts);

    switch (kind) {
      case 'file': {
        if (this.summary.bytes + e.size > this.limits.maxBytes) {
          throw new ArchiveRefused('too_large', name, `more than ${this.limits.maxBytes} bytes of file data`);
        }
        await this.clear(full, name);
        await this.writeFile(full, e.size, e.mode & 0o777, e.mtime);
        this.kinds.set(path, 'file');
        this.summary.files++;
        this.summary.bytes += e.size;
        return;
      }
      case 'hardlink': {
        // Only to a regular file this archive already restored: anything else could reach outside.
        const targetPath = this.linkTargetInArchive(e.linkname, name);
        await this.clear(full, name);
        await link(join(this.root, targetPath), full);
        this.kinds.set(path, 'file');
        this.summary.files++;
        return this.input.skip(e.size + padding(e.size));
      }
      case 'symlink': {
        checkSymlinkTarget(e.linkname, parts, name);
        await this.clear(full, name);
        await symlink(e.linkname, full);
        await lutimes(full, e.mtime, e.mtime);
        this.kinds.set(path, 'symlink');
        this.summary.symlinks++;
        return this.input.skip(e.size + padding(e.size));
      }
      case 'dir': {
        const existing = await lstatOrUndefined(full);
        if (!existing?.isDirectory()) {
          if (existing) await unlink(full);
          // Writable by us until the end, whatever the archive says; its own mode comes last.
          await mkdir(full, { mode: 0o700 });
        }
        this.madeDirs.add(path);
        this.kinds.set(path, 'dir');
        this.dirAttributes.set(path, { mode: e.mode & 0o777, mtime: e.mtime });
        this.summary.dirs++;
        return this.input.skip(e.size + padding(e.size));
      }
    }
  }

  /** The entry's path as components, refusing absolute names and any `..`. */
  private pathOf(name: string): string[] {
    if (name.startsWith('/')) throw new ArchiveRefused('absolute_path', name, 'absolute path');
    const parts = name.split('/').filter((p) => p !== '' && p !== '.');
    if (parts.includes('..')) throw new ArchiveRefused('path_escape', name, "'..' in path");
    return parts;
  }

  /** No entry may be written through a symbolic link this archive made, nor beneath one of its files. */
  private checkParents(parts: string[], name: string): void {
    for (let i = 1; i < parts.length; i++) {
      const kind = this.kinds.get(parts.slice(0, i).join('/'));
      if (kind === 'symlink') throw new ArchiveRefused('through_link', name, `'${parts.slice(0, i).join('/')}' is a symbolic link`);
      if (kind === 'file') throw new ArchiveRefused('unsupported_entry', name, `'${parts.slice(0, i).join('/')}' is a file`);
    }
  }

  private async makeParent(parts: string[]): Promise<void> {
    const parent = parts.slice(0, -1).join('/');
    if (this.madeDirs.has(parent)) return;
    await mkdir(join(this.root, ...parts.slice(0, -1)), { recursive: true });
    this.madeDirs.add(parent);
  }

  /**
   * An entry replaces what an earlier one put at its path (unlinked, so a hard link to the old file
   * keeps the old content), except a directory: replacing a whole subtree is refused.
   */
  private async clear(full: string, name: string): Promise<void> {
    const existing = await lstatOrUndefined(full);
    if (!existing) return;
    if (existing.isDirectory()) throw new ArchiveRefused('unsupported_entry', name, 'replaces a directory');
    await unlink(full);
  }

  private linkTargetInArchive(linkname: string, name: string): string {
    if (linkname.startsWith('/')) throw new ArchiveRefused('link_escape', name, `hard link to absolute '${linkname}'`);
    const parts = linkname.split('/').filter((p) => p !== '' && p !== '.');
    const path = parts.join('/');
    if (parts.includes('..') || this.kinds.get(path) !== 'file') {
      throw new ArchiveRefused('link_escape', name, `hard link to '${linkname}', which is not a file restored before it`);
    }
    return path;
  }

  private async writeFile(full: string, size: number, mode: number, mtime: number): Promise<void> {
    // O_EXCL | O_NOFOLLOW: whatever was at the path is gone (clear), so this creates, never follows.
    const file = await open(full, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    try {
      for (let left = size; left > 0; ) {
        const chunk = await this.input.some(left);
        if (chunk === undefined) throw this.input.truncated();
        for (let off = 0; off < chunk.length; ) off += (await file.write(chunk, off)).bytesWritten;
        left -= chunk.length;
      }
      await file.chmod(mode);
      await file.utimes(mtime, mtime);
    } finally {
      await file.close();
    }
    await this.input.skip(padding(size));
  }

  /** Deepest first, so setting a directory's mtime is the last change inside its parent. */
  private async applyDirectoryAttributes(): Promise<void> {
    const paths = [...this.dirAttributes.keys()].sort((a, b) => depth(b) - depth(a));
    for (const path of paths) {
      const { mode, mtime } = this.dirAttributes.get(path)!;
      const full = path === '' ? this.root : join(this.root, ...path.split('/'));
      await chmod(full, mode);
      await utimes(full, mtime, mtime);
    }
  }
}

type EntryKind = 'file' | 'hardlink' | 'symlink' | 'dir';

function kindOf(typeflag: string, name: string): EntryKind {
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
      throw new ArchiveRefused('device_file', name, 'device file');
    case '6':
      throw new ArchiveRefused('device_file', name, 'fifo');
    default:
      throw new ArchiveRefused('unsupported_entry', name, `entry type '${typeflag === '\0' ? '\\0' : typeflag}'`);
  }
}

/**
 * A symbolic link's target is judged by its text alone, so no order of entries can make an accepted
 * link point outside: relative, some `..` first and never after a name, and no more of them than the
 * link's own depth. (A purely textual normalisation is not enough: `a/..` walks out if `a` is later
 * made a link to `.`.) The directories above the link are real ones (see checkParents), and every
 * link among the names after the `..`s is held to the same rule, so resolution stays inside.
 */
function checkSymlinkTarget(linkname: string, parts: string[], name: string): void {
  if (linkname === '') throw new ArchiveRefused('link_escape', name, 'empty link target');
  if (linkname.startsWith('/')) throw new ArchiveRefused('link_escape', name, `absolute link target '${linkname}'`);
  let ups = 0;
  let seenName = false;
  for (const part of linkname.split('/')) {
    if (part === '' || part === '.') continue;
    if (part !== '..') seenName = true;
    else if (seenName) throw new ArchiveRefused('link_escape', name, `'..' after a name in link target '${linkname}'`);
    else ups++;
  }
  if (ups > parts.length - 1) throw new ArchiveRefused('link_escape', name, `link target '${linkname}' leaves the tree`);
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

function depth(path: string): number {
  return path === '' ? 0 : path.split('/').length;
}

async function lstatOrUndefined(path: string) {
  try {
    return await lstat(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}
