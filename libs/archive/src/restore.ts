import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { link, lstat, lutimes, mkdir, open, readdir, rename, rm, symlink, unlink, chmod, utimes } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import type { Readable } from 'node:stream';
import { ArchiveRefused } from './refusal';
import { entryTypeOf, TarReader, type TarEntry } from './tar-reader';

export { ArchiveRefused, type RefusalReason } from './refusal';

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

  // Headers and padding stay well under 4 KiB per entry; past this budget the stream is not a tar we want.
  const reader = new TarReader(source, { maxEntries: limits.maxEntries, maxStreamBytes: limits.maxBytes + limits.maxEntries * 4096 });
  try {
    const summary = await new Extraction(staging, reader, limits).run();
    await moveInto(staging, target);
    return summary;
  } catch (err) {
    reader.close();
    await rm(staging, { recursive: true, force: true }).catch(() => undefined);
    throw reader.refusalOf(err);
  }
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

type Kind = 'file' | 'dir' | 'symlink';

class Extraction {
  private readonly summary: RestoreSummary = { files: 0, dirs: 0, symlinks: 0, bytes: 0 };
  private entries = 0;
  /** What this restore put at each path (relative, `/`-joined). */
  private readonly kinds = new Map<string, Kind>();
  /** Directories' final mode and mtime, applied once everything beneath them is written. */
  private readonly dirAttributes = new Map<string, { mode: number; mtime: number }>();
  private readonly madeDirs = new Set<string>(['']);

  constructor(
    private readonly root: string,
    private readonly reader: TarReader,
    private readonly limits: Required<RestoreOptions>,
  ) {}

  async run(): Promise<RestoreSummary> {
    for (let e = await this.reader.next(); e !== undefined; e = await this.reader.next()) await this.entry(e);
    // Read to the end so gunzip checks the CRC and length in its trailer before anything is kept.
    await this.reader.end();
    await this.applyDirectoryAttributes();
    return this.summary;
  }

  private async entry(e: TarEntry): Promise<void> {
    const { name, typeflag } = e;
    const kind = kindOf(typeflag, name);
    if (e.mode & 0o6000) throw new ArchiveRefused('setuid', name, `mode ${(e.mode & 0o7777).toString(8)} has setuid/setgid`);
    const parts = this.pathOf(name);
    const path = parts.join('/');

    if (path === '') {
      // `./` itself (GNU tar -C dir .): its mode and mtime become the target's.
      if (kind !== 'dir') throw new ArchiveRefused('unsupported_entry', name, 'a non-directory entry names the archive root');
      this.dirAttributes.set('', { mode: e.mode & 0o777, mtime: e.mtime });
      return;
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
        await this.writeFile(full, e.mode & 0o777, e.mtime);
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
        return;
      }
      case 'symlink': {
        checkSymlinkTarget(e.linkname, parts, name);
        await this.clear(full, name);
        await symlink(e.linkname, full);
        await lutimes(full, e.mtime, e.mtime);
        this.kinds.set(path, 'symlink');
        this.summary.symlinks++;
        return;
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
        return;
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

  private async writeFile(full: string, mode: number, mtime: number): Promise<void> {
    // O_EXCL | O_NOFOLLOW: whatever was at the path is gone (clear), so this creates, never follows.
    const file = await open(full, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    try {
      for await (const chunk of this.reader.data()) {
        for (let off = 0; off < chunk.length; ) off += (await file.write(chunk, off)).bytesWritten;
      }
      await file.chmod(mode);
      await file.utimes(mtime, mtime);
    } finally {
      await file.close();
    }
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
  const type = entryTypeOf(typeflag);
  if (type === 'device') throw new ArchiveRefused('device_file', name, 'device file');
  if (type === 'fifo') throw new ArchiveRefused('device_file', name, 'fifo');
  if (type === 'other') throw new ArchiveRefused('unsupported_entry', name, `entry type '${typeflag === '\0' ? '\\0' : typeflag}'`);
  return type;
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
