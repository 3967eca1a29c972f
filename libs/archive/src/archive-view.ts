import type { Readable } from 'node:stream';
import { ArchiveRefused } from './refusal';
import { entryTypeOf, TarReader, type TarEntry } from './tar-reader';
import { DEFAULT_RESTORE_MAX_BYTES, DEFAULT_RESTORE_MAX_ENTRIES } from './restore';

/** What an entry of an archive is. */
export type ArchiveEntryType = 'file' | 'dir' | 'symlink' | 'hardlink' | 'other';

/** One entry of an archive, as a listing shows it. */
export interface ArchiveEntry {
  /** As the archive names it, without a leading `./` or a directory's trailing `/`. */
  path: string;
  type: ArchiveEntryType;
  /** Bytes of data (a file's size; 0 for the others). */
  size: number;
  /** Permission bits (and the setuid/setgid/sticky bits, as stored). */
  mode: number;
  /** ISO 8601, from the archive's whole seconds. */
  mtime: string;
  /** A symbolic or hard link's target. */
  link?: string;
}

export interface ArchivePage {
  entries: ArchiveEntry[];
  /** The `after` of the next page (how many entries came before it), when there are entries past this one. */
  next_after?: string;
}

/** A path in an archive, refused before any reading: empty, absolute, with `..` or a NUL. */
export class BadArchivePath extends Error {}

/** The archive has no regular file at the path. */
export class ArchiveFileNotFound extends Error {}

/** The file is larger than the caller will serve. */
export class ArchiveFileTooLarge extends Error {
  constructor(
    readonly path: string,
    readonly size: number,
    readonly max: number,
  ) {
    super(`'${path}' is ${size} bytes, more than the ${max} served`);
  }
}

/** Archives this view (and a diff) reads are bounded as a restore's are. */
export const VIEW_LIMITS = { maxEntries: DEFAULT_RESTORE_MAX_ENTRIES, maxStreamBytes: DEFAULT_RESTORE_MAX_BYTES + DEFAULT_RESTORE_MAX_ENTRIES * 4096 };

/** An archive path as listings show it: no `./` in front, no trailing `/`. */
export function normalArchivePath(name: string): string {
  return name
    .split('/')
    .filter((part) => part !== '' && part !== '.')
    .join('/');
}

/** Refuses a path asked for before any archive is read; returns it as listings show it. */
export function checkArchivePath(path: string): string {
  if (path.includes('\0')) throw new BadArchivePath('a path must not contain NUL');
  if (path.startsWith('/')) throw new BadArchivePath('a path must be relative to the workspace, not absolute');
  if (path.split('/').includes('..')) throw new BadArchivePath("a path must not contain '..'");
  const normal = normalArchivePath(path);
  if (normal === '') throw new BadArchivePath('a path must name an entry');
  return normal;
}

function typeOf(typeflag: string): ArchiveEntryType {
  const type = entryTypeOf(typeflag);
  return type === 'device' || type === 'fifo' ? 'other' : type;
}

/** An entry as a listing (and a diff) shows it. */
export function entryOf(e: TarEntry, path: string): ArchiveEntry {
  const type = typeOf(e.typeflag);
  return {
    path,
    type,
    size: type === 'file' ? e.size : 0,
    mode: e.mode & 0o7777,
    mtime: new Date(e.mtime * 1000).toISOString(),
    ...(type === 'symlink' || type === 'hardlink' ? { link: e.linkname } : {}),
  };
}

/**
 * A page of an archive's entries in archive order, read as the archive streams (data skipped, never
 * extracted), stopping once the page is full: `after` is how many entries the pages before listed (the
 * previous page's `next_after`), a position in the archive, so an archive that names a path twice
 * still pages through to its end. The archive's root (`./`) is not an entry.
 */
export async function listArchive(source: Readable, options: { after?: number; limit: number }): Promise<ArchivePage> {
  const reader = new TarReader(source, VIEW_LIMITS);
  const entries: ArchiveEntry[] = [];
  const skip = options.after ?? 0;
  let seen = 0;
  try {
    for (let e = await reader.next(); e !== undefined; e = await reader.next()) {
      const path = normalArchivePath(e.name);
      if (path === '') continue;
      if (seen++ < skip) continue;
      if (entries.length === options.limit) return { entries, next_after: String(skip + entries.length) };
      entries.push(entryOf(e, path));
    }
    return { entries };
  } catch (err) {
    throw reader.refusalOf(err);
  } finally {
    reader.close();
  }
}

/**
 * One regular file of an archive, found as the archive streams: its entry, and its bytes to read once
 * (then the archive is closed; `close` closes it unread). The first entry with the path is the one read.
 * Past `maxBytes` it is refused with its size before any of it is read.
 */
export async function openArchiveFile(source: Readable, path: string, maxBytes: number): Promise<{ entry: ArchiveEntry; data: AsyncGenerator<Buffer>; close: () => void }> {
  let wanted: string;
  try {
    wanted = checkArchivePath(path);
  } catch (err) {
    source.destroy();
    throw err;
  }
  const reader = new TarReader(source, VIEW_LIMITS);
  try {
    for (let e = await reader.next(); e !== undefined; e = await reader.next()) {
      if (normalArchivePath(e.name) !== wanted) continue;
      const entry = entryOf(e, wanted);
      if (entry.type !== 'file') throw new ArchiveFileNotFound(`'${wanted}' is a ${entry.type === 'dir' ? 'directory' : entry.type}, not a file`);
      if (entry.size > maxBytes) throw new ArchiveFileTooLarge(wanted, entry.size, maxBytes);
      async function* data(): AsyncGenerator<Buffer> {
        try {
          yield* reader.data();
        } catch (err) {
          throw reader.refusalOf(err);
        } finally {
          reader.close();
        }
      }
      return { entry, data: data(), close: () => reader.close() };
    }
    throw new ArchiveFileNotFound(`the archive has no '${wanted}'`);
  } catch (err) {
    reader.close();
    throw err instanceof ArchiveRefused ? err : reader.refusalOf(err);
  }
}
