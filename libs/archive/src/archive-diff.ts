import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { createTwoFilesPatch } from 'diff';
import { entryOf, normalArchivePath, VIEW_LIMITS, type ArchiveEntryType } from './archive-view';
import { entryTypeOf, TarReader } from './tar-reader';

/** What a diff knows of an entry: enough to tell two apart without holding either. */
interface Fingerprint {
  type: ArchiveEntryType;
  size: number;
  mode: number;
  link?: string;
  /** A regular file's bytes, hashed as they streamed. */
  sha256?: string;
}

export interface ArchiveDiffEntry {
  path: string;
  type: ArchiveEntryType;
  size: number;
}

export interface ArchiveChange {
  path: string;
  /** What differs: the bytes, the kind of entry, the permission bits, a link's target. */
  what: ('content' | 'type' | 'mode' | 'link')[];
  before: ArchiveDiffEntry & { mode: number };
  after: ArchiveDiffEntry & { mode: number };
  /** A unified diff of a changed text file (both sides UTF-8, no NUL, each under the text cap). */
  diff?: string;
  /** Why a changed file has no diff. */
  diff_omitted?: 'binary' | 'too_large' | 'diff_budget';
  /** The diff was longer than the per-file cap and is cut there. */
  diff_truncated?: true;
}

export interface ArchiveDiff {
  added: ArchiveDiffEntry[];
  removed: ArchiveDiffEntry[];
  changed: ArchiveChange[];
  unchanged: number;
}

export interface ArchiveDiffOptions {
  /** A file larger than this (either side) gets no diff. */
  textMaxBytes: number;
  /** Bytes of text read for diffs in all (both sides); files past it, in path order, get none. */
  diffBudgetBytes: number;
  /** A diff longer than this is cut. */
  diffMaxChars: number;
}

export const DEFAULT_DIFF_OPTIONS: ArchiveDiffOptions = { textMaxBytes: 256 * 1024, diffBudgetBytes: 4 * 1024 * 1024, diffMaxChars: 64 * 1024 };

/** Every entry of an archive by path (the last of a path wins, as extraction would leave it), files hashed. */
async function fingerprints(source: Readable): Promise<Map<string, Fingerprint>> {
  const reader = new TarReader(source, VIEW_LIMITS);
  const out = new Map<string, Fingerprint>();
  try {
    for (let e = await reader.next(); e !== undefined; e = await reader.next()) {
      const path = normalArchivePath(e.name);
      if (path === '') continue;
      const { type, size, mode, link } = entryOf(e, path);
      const print: Fingerprint = { type, size, mode, ...(link !== undefined ? { link } : {}) };
      if (type === 'file') {
        const hash = createHash('sha256');
        for await (const chunk of reader.data()) hash.update(chunk);
        print.sha256 = hash.digest('hex');
      }
      out.set(path, print);
    }
    await reader.end();
    return out;
  } catch (err) {
    throw reader.refusalOf(err);
  } finally {
    reader.close();
  }
}

/** The bytes of the files asked for (the last of each path; none larger than `maxBytes` is held), read as the archive streams. */
async function contents(source: Readable, paths: Set<string>, maxBytes: number): Promise<Map<string, Buffer>> {
  const reader = new TarReader(source, VIEW_LIMITS);
  const out = new Map<string, Buffer>();
  try {
    for (let e = await reader.next(); e !== undefined; e = await reader.next()) {
      const path = normalArchivePath(e.name);
      if (!paths.has(path) || entryTypeOf(e.typeflag) !== 'file') continue;
      if (e.size > maxBytes) {
        out.delete(path);
        continue;
      }
      const chunks: Buffer[] = [];
      for await (const chunk of reader.data()) chunks.push(Buffer.from(chunk));
      out.set(path, Buffer.concat(chunks));
    }
    return out;
  } catch (err) {
    throw reader.refusalOf(err);
  } finally {
    reader.close();
  }
}

/** A file's text when the snapshot diff takes it as text (UTF-8, no NUL byte); undefined when binary. */
export function textOf(bytes: Buffer): string | undefined {
  if (bytes.includes(0)) return undefined;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
}

/**
 * What changed from archive `a` to archive `b`: entries added, removed and changed (bytes by SHA-256,
 * kind, permission bits, link target), each archive read as it streams, twice at most: once to
 * fingerprint every entry, and again only for the changed text files a unified diff is made of (under
 * the caps of `options`). `open` gives a fresh stream of a side each time it is called.
 */
export async function diffArchives(open: (side: 'a' | 'b') => Promise<Readable>, options: ArchiveDiffOptions = DEFAULT_DIFF_OPTIONS): Promise<ArchiveDiff> {
  const [a, b] = [await fingerprints(await open('a')), await fingerprints(await open('b'))];
  const entry = (path: string, f: Fingerprint) => ({ path, type: f.type, size: f.size });
  const added = [...b].filter(([path]) => !a.has(path)).map(([path, f]) => entry(path, f));
  const removed = [...a].filter(([path]) => !b.has(path)).map(([path, f]) => entry(path, f));
  const changed: ArchiveChange[] = [];
  let unchanged = 0;
  for (const [path, before] of a) {
    const after = b.get(path);
    if (!after) continue;
    const what: ArchiveChange['what'] = [];
    if (before.type !== after.type) what.push('type');
    else if (before.sha256 !== after.sha256) what.push('content');
    if (before.mode !== after.mode) what.push('mode');
    if (before.link !== after.link) what.push('link');
    if (what.length === 0) unchanged++;
    else changed.push({ path, what, before: { ...entry(path, before), mode: before.mode }, after: { ...entry(path, after), mode: after.mode } });
  }
  const byPath = (x: { path: string }, y: { path: string }) => (x.path < y.path ? -1 : x.path > y.path ? 1 : 0);
  added.sort(byPath);
  removed.sort(byPath);
  changed.sort(byPath);

  // Diffs of the changed files with text on both sides, in path order, while the budget lasts.
  const wanted = new Set<string>();
  let budget = options.diffBudgetBytes;
  for (const c of changed) {
    if (!c.what.includes('content') || c.before.type !== 'file' || c.after.type !== 'file') continue;
    if (c.before.size > options.textMaxBytes || c.after.size > options.textMaxBytes) {
      c.diff_omitted = 'too_large';
      continue;
    }
    if (c.before.size + c.after.size > budget) {
      c.diff_omitted = 'diff_budget';
      continue;
    }
    budget -= c.before.size + c.after.size;
    wanted.add(c.path);
  }
  if (wanted.size === 0) return { added, removed, changed, unchanged };
  const [textsA, textsB] = [await contents(await open('a'), wanted, options.textMaxBytes), await contents(await open('b'), wanted, options.textMaxBytes)];
  for (const c of changed) {
    if (!wanted.has(c.path)) continue;
    const [before, after] = [textOf(textsA.get(c.path) ?? Buffer.alloc(0)), textOf(textsB.get(c.path) ?? Buffer.alloc(0))];
    if (before === undefined || after === undefined) {
      c.diff_omitted = 'binary';
      continue;
    }
    const patch = createTwoFilesPatch(`a/${c.path}`, `b/${c.path}`, before, after, undefined, undefined, { context: 3 });
    // The header's first line (`Index:`/`===`) says nothing the path does not: from the `---` line on.
    const unified = patch.slice(patch.indexOf('--- '));
    if (unified.length > options.diffMaxChars) {
      c.diff = unified.slice(0, options.diffMaxChars);
      c.diff_truncated = true;
    } else c.diff = unified;
  }
  return { added, removed, changed, unchanged };
}
