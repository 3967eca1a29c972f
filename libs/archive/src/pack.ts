import { constants, type Stats } from 'node:fs';
import { lstat, open, readdir, readlink, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { StoredGzipWriter } from './gzip-stored';
import { BLOCK, encodeHeader, padding, type EntryType } from './tar-header';

/** Files are read straight into a staging buffer of this size, which is framed and handed on whole. */
const CHUNK = 1024 * 1024;
/**
 * How far packing may run ahead of the consumer: a few chunks, so a read overlaps the consumer's
 * write without memory growing with the workspace.
 */
const READ_AHEAD = 4 * CHUNK;
const ZEROS = Buffer.alloc(2 * BLOCK);

export interface PackOptions {
  /** Called as output is produced, with the compressed bytes so far (for heartbeats). */
  onProgress?: (bytesOut: number) => void;
}

/**
 * The directory's contents as a streaming .tar.gz, entries relative to `dir` (like
 * `tar -C dir -czf - .` without the `./` prefix), in sorted order so the same tree gives the same
 * bytes. The gzip holds stored blocks only (see StoredGzipWriter). Regular files, directories and
 * symbolic links are archived with their permission bits (never setuid/setgid/sticky) and mtime;
 * owner 0/0 with no names, so the archive unpacks the same for anyone. Sockets, fifos and devices
 * are left out without error; a hard link is archived as a second copy of the file.
 *
 * Names are taken as the UTF-8 strings node reads them as: a file name that is not valid UTF-8 is
 * archived under the name with replacement characters.
 *
 * The stream pulls: reading stays at most READ_AHEAD ahead of the consumer, so what is live is a few
 * 1 MiB chunks however large the workspace (RSS growth, garbage included, stays well under 64 MiB
 * and flat with size: npm run bench:snapshot).
 */
export function packDirectory(dir: string, options: PackOptions = {}): Readable {
  return Readable.from(tarGz(dir, options.onProgress), { objectMode: false, highWaterMark: READ_AHEAD });
}

interface Entry {
  /** Relative, `/`-separated. */
  path: string;
  type: EntryType;
  stats: Stats;
}

async function* tarGz(root: string, onProgress?: (bytesOut: number) => void): AsyncGenerator<Buffer> {
  const gzip = new StoredGzipWriter();
  const stage = Buffer.allocUnsafe(CHUNK);
  let fill = 0;
  let bytesOut = 0;

  const emit = (final: boolean): Buffer => {
    const framed = gzip.frame(stage.subarray(0, fill), final);
    fill = 0;
    bytesOut += framed.length;
    onProgress?.(bytesOut);
    return framed;
  };
  function* put(bytes: Buffer): Generator<Buffer> {
    for (let off = 0; off < bytes.length; ) {
      if (fill === stage.length) yield emit(false);
      const n = bytes.copy(stage, fill, off);
      fill += n;
      off += n;
    }
  }

  for await (const entry of walk(root, '')) {
    const full = join(root, entry.path);
    const mode = entry.stats.mode & 0o777;
    const mtime = Math.floor(entry.stats.mtimeMs / 1000);

    if (entry.type === 'dir') {
      yield* put(encodeHeader({ path: entry.path, type: 'dir', mode, size: 0, mtime }));
    } else if (entry.type === 'symlink') {
      const linkname = await ifStillThere(readlink(full));
      if (linkname === undefined) continue;
      yield* put(encodeHeader({ path: entry.path, type: 'symlink', mode, size: 0, mtime, linkname }));
    } else {
      // O_NOFOLLOW: if the file was swapped for a link since it was listed, it is skipped, not followed.
      const file = await ifStillThere(open(full, constants.O_RDONLY | constants.O_NOFOLLOW));
      if (file === undefined) continue;
      try {
        const size = entry.stats.size;
        yield* put(encodeHeader({ path: entry.path, type: 'file', mode, size, mtime }));
        for (let left = size; left > 0; ) {
          if (fill === stage.length) yield emit(false);
          const want = Math.min(left, stage.length - fill);
          const { bytesRead } = await file.read(stage, fill, want, null);
          // The header's size is already out, so the data must match it: a file that shrank while we
          // read it is padded with zeros, one that grew is cut at the size it had when listed.
          // Either way the archive stays valid; the file's content is as torn as the writer left it.
          const got = bytesRead === 0 ? want : bytesRead;
          if (bytesRead === 0) stage.fill(0, fill, fill + want);
          fill += got;
          left -= got;
        }
        yield* put(ZEROS.subarray(0, padding(size)));
      } finally {
        await closeQuietly(file);
      }
    }
  }

  yield* put(ZEROS); // end of archive: two zero blocks
  yield emit(true);
}

/** Depth first, each directory's names sorted, a directory before its contents. */
async function* walk(root: string, dir: string): AsyncGenerator<Entry> {
  // A missing root is an error; a subdirectory that went away after it was listed is not.
  const names = dir === '' ? await readdir(root) : await ifStillThere(readdir(join(root, dir)));
  if (names === undefined) return;
  names.sort();
  for (const name of names) {
    const path = dir ? `${dir}/${name}` : name;
    const stats = await ifStillThere(lstat(join(root, path)));
    if (stats === undefined) continue;
    if (stats.isDirectory()) {
      yield { path, type: 'dir', stats };
      yield* walk(root, path);
    } else if (stats.isFile()) {
      yield { path, type: 'file', stats };
    } else if (stats.isSymbolicLink()) {
      yield { path, type: 'symlink', stats };
    }
    // Sockets, fifos and devices: nothing a workspace needs and nothing a restore would accept.
  }
}

/** The workspace is live: a name listed a moment ago may be gone (or be a link now) when we get to it. */
async function ifStillThere<T>(op: Promise<T>): Promise<T | undefined> {
  try {
    return await op;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ELOOP' || code === 'ENOTDIR') return undefined;
    throw err;
  }
}

async function closeQuietly(file: FileHandle): Promise<void> {
  try {
    await file.close();
  } catch {
    // Closing a read-only handle can only fail if it is already closed; the data was read.
  }
}
