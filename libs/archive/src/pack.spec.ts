import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { appendFile, chmod, lstat, mkdir, mkdtemp, readdir, readFile, readlink, rm, stat, symlink, truncate, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { gunzipSync } from 'node:zlib';
import { packDirectory } from './pack';
import { restoreArchive } from './restore';

// ---------------------------------------------------------------------------------------------------
// A workspace with what a real one has, and a description of a tree to compare two with one toEqual.
// ---------------------------------------------------------------------------------------------------

interface TreeEntry {
  type: 'file' | 'dir' | 'symlink';
  mode?: number;
  /** Whole seconds (what tar keeps). */
  mtime?: number;
  sha256?: string;
  size?: number;
  target?: string;
}

/** Every entry under `root` by relative path; fifos and other special files are left out, as packing does. */
async function describeTree(root: string, rel = ''): Promise<Record<string, TreeEntry>> {
  const out: Record<string, TreeEntry> = {};
  for (const name of (await readdir(join(root, rel))).sort()) {
    const path = rel ? `${rel}/${name}` : name;
    const full = join(root, path);
    const s = await lstat(full);
    const mtime = Math.floor(s.mtimeMs / 1000);
    if (s.isSymbolicLink()) {
      out[path] = { type: 'symlink', target: await readlink(full) };
    } else if (s.isDirectory()) {
      out[path] = { type: 'dir', mode: s.mode & 0o777, mtime };
      Object.assign(out, await describeTree(root, path));
    } else if (s.isFile()) {
      const data = await readFile(full);
      out[path] = { type: 'file', mode: s.mode & 0o777, mtime, size: data.length, sha256: createHash('sha256').update(data).digest('hex') };
    }
  }
  return out;
}

const T0 = 1_700_000_000;

/**
 * A small workspace with what a real one has: binary and text files, an empty file, empty and nested
 * directories, relative symlinks inside it, executable and private modes, distinct mtimes (set last,
 * deepest first, so writing a child does not move its parent's).
 */
async function buildWorkspace(root: string): Promise<void> {
  await mkdir(join(root, 'src/lib/deep/er'), { recursive: true });
  await mkdir(join(root, 'empty'), { recursive: true });
  await mkdir(join(root, 'src/empty-too'), { recursive: true });
  // 3 MiB + 17: spans several 1 MiB staging chunks and many 64 KiB stored blocks, ends mid-block.
  await writeFile(join(root, 'data.bin'), randomBytes(3 * 1024 * 1024 + 17));
  await writeFile(join(root, 'src/lib/notes.md'), '# notes\n'.repeat(5_000));
  await writeFile(join(root, 'src/lib/deep/er/leaf.txt'), 'leaf\n');
  await writeFile(join(root, 'src/empty.txt'), '');
  await writeFile(join(root, 'run.sh'), '#!/bin/sh\necho hi\n');
  await chmod(join(root, 'run.sh'), 0o755);
  await writeFile(join(root, 'secret.env'), 'TOKEN=x\n');
  await chmod(join(root, 'secret.env'), 0o600);
  await chmod(join(root, 'src/lib'), 0o750);
  // Past ustar's 100-byte name and 155-byte prefix: needs a pax (or GNU long name) header.
  const long = `src/${'n'.repeat(120)}/${'m'.repeat(150)}`;
  await mkdir(join(root, long), { recursive: true });
  await writeFile(join(root, long, `${'f'.repeat(110)}.txt`), 'long name\n');
  // 146 bytes: fits ustar only split into prefix and name.
  const split = `src/${'p'.repeat(60)}/${'q'.repeat(77)}.txt`;
  await mkdir(join(root, split, '..'), { recursive: true });
  await writeFile(join(root, split), 'split name\n');
  await symlink('lib/notes.md', join(root, 'src/notes-link'));
  await symlink('../..', join(root, 'src/lib/deep/up-two'));
  await symlink('src/lib', join(root, 'lib-link'));
  await symlink(`src/lib/${'x'.repeat(140)}`, join(root, 'long-target-link')); // dangling, and past 100 bytes

  const files = ['data.bin', 'src/lib/notes.md', 'src/lib/deep/er/leaf.txt', 'src/empty.txt', 'run.sh', 'secret.env', `${long}/${'f'.repeat(110)}.txt`, split];
  for (const [i, f] of files.entries()) await utimes(join(root, f), T0 + i * 1000, T0 + i * 1000);
  const dirs = [long, `src/${'n'.repeat(120)}`, `src/${'p'.repeat(60)}`, 'src/lib/deep/er', 'src/lib/deep', 'src/lib', 'src/empty-too', 'src', 'empty'];
  for (const [i, d] of dirs.entries()) await utimes(join(root, d), T0 - i * 3600, T0 - i * 3600);
}

// ---------------------------------------------------------------------------------------------------

async function packToFile(dir: string, file: string): Promise<void> {
  await pipeline(packDirectory(dir), createWriteStream(file));
}

describe('a packed workspace', () => {
  let base: string;
  let src: string;
  beforeAll(async () => {
    base = await mkdtemp(join(tmpdir(), 'archive-'));
    src = join(base, 'src');
    await buildWorkspace(src);
  });
  afterAll(() => rm(base, { recursive: true, force: true }));

  it('restores to the same tree: contents, modes, mtimes in whole seconds, symlink targets', async () => {
    const target = join(base, 'restored');
    const summary = await restoreArchive(packDirectory(src), target);
    expect(await describeTree(target)).toEqual(await describeTree(src));
    expect(summary).toMatchObject({ files: 8, symlinks: 4 });
    expect(summary.bytes).toBe(3 * 1024 * 1024 + 17 + '# notes\n'.length * 5_000 + 'leaf\n'.length + '#!/bin/sh\necho hi\n'.length + 'TOKEN=x\n'.length + 'long name\n'.length + 'split name\n'.length);
  });

  it('is the same bytes every time for the same tree', async () => {
    await packToFile(src, join(base, 'one.tgz'));
    await packToFile(src, join(base, 'two.tgz'));
    expect((await readFile(join(base, 'one.tgz'))).equals(await readFile(join(base, 'two.tgz')))).toBe(true);
  });

  it('is gzip of stored blocks only: its size is the tar plus 5 bytes a block and the gzip frame', async () => {
    const archive = join(base, 'stored.tgz');
    await packToFile(src, archive);
    const tarBytes = gunzipSync(await readFile(archive)).length;
    const { size } = await stat(archive);
    // Stored blocks of at most 65,535 bytes, one staging chunk (1 MiB) at a time.
    const chunks = Math.ceil(tarBytes / (1024 * 1024));
    const blocks = Array.from({ length: chunks }, (_, i) => Math.ceil(Math.min(1024 * 1024, tarBytes - i * 1024 * 1024) / 65_535)).reduce((a, b) => a + b, 0);
    expect(size).toBe(10 + tarBytes + 5 * blocks + 8);
  });

  it('is read by GNU tar and gzip: every entry listed, and `tar xzf` gives the same tree', async () => {
    const archive = join(base, 'gnu.tgz');
    await packToFile(src, archive);
    execFileSync('gzip', ['-t', archive]);
    const listed = execFileSync('tar', ['tzf', archive], { encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 })
      .split('\n')
      .filter(Boolean)
      .map((name) => name.replace(/\/$/, ''));
    expect(listed.sort()).toEqual(Object.keys(await describeTree(src)).sort());

    const out = join(base, 'gnu-out');
    await mkdir(out);
    execFileSync('tar', ['xzpf', archive, '-C', out]);
    expect(await describeTree(out)).toEqual(await describeTree(src));
  });

  it('leaves out fifos without an error', async () => {
    const dir = join(base, 'with-fifo');
    await mkdir(dir);
    await writeFile(join(dir, 'a.txt'), 'a');
    execFileSync('mkfifo', [join(dir, 'pipe')]);
    const listed = execFileSync('tar', ['tzf', '-'], { input: await streamToBuffer(packDirectory(dir)), encoding: 'utf8' });
    expect(listed.split('\n').filter(Boolean)).toEqual(['a.txt']);
  });

  it('of an empty directory is a valid, empty archive', async () => {
    const dir = join(base, 'empty-ws');
    await mkdir(dir);
    const bytes = await streamToBuffer(packDirectory(dir));
    expect(gunzipSync(bytes)).toEqual(Buffer.alloc(1024));
    expect(await restoreArchive(packDirectory(dir), join(base, 'empty-restored'))).toEqual({ files: 0, dirs: 0, symlinks: 0, bytes: 0 });
  });

  it('of a missing directory is an error', async () => {
    await expect(streamToBuffer(packDirectory(join(base, 'nope')))).rejects.toThrow(/ENOENT/);
  });

  it('stays valid when a file shrinks or grows while it is read: the size in its header wins', async () => {
    const dir = join(base, 'changing');
    await mkdir(dir);
    const size = 12 * 1024 * 1024;
    await writeFile(join(dir, 'grows.bin'), randomBytes(1024));
    await writeFile(join(dir, 'shrinks.bin'), randomBytes(size));
    const stream = packDirectory(dir);
    const chunks: Buffer[] = [];
    const reader = stream[Symbol.asyncIterator]();
    chunks.push((await reader.next()).value as Buffer);
    // The stream reads ahead a few MiB at most, so most of shrinks.bin is still unread here.
    await truncate(join(dir, 'shrinks.bin'), 10);
    await appendFile(join(dir, 'grows.bin'), randomBytes(4096));
    for (let r = await reader.next(); !r.done; r = await reader.next()) chunks.push(r.value as Buffer);
    const archive = join(base, 'changing.tgz');
    await writeFile(archive, Buffer.concat(chunks));
    execFileSync('gzip', ['-t', archive]);

    const out = join(base, 'changing-out');
    await restoreArchive(createReadStream(archive), out);
    expect((await stat(join(out, 'grows.bin'))).size).toBe(1024);
    const shrunk = await readFile(join(out, 'shrinks.bin'));
    expect(shrunk.length).toBe(size);
    expect(shrunk.subarray(size - 1024 * 1024).equals(Buffer.alloc(1024 * 1024))).toBe(true);
  });

  it('reports its output as it goes', async () => {
    const seen: number[] = [];
    const bytes = await streamToBuffer(packDirectory(src, { onProgress: (n) => seen.push(n) }));
    expect(seen.length).toBeGreaterThan(1);
    expect(seen).toEqual([...seen].sort((a, b) => a - b));
    expect(seen[seen.length - 1]).toBe(bytes.length);
  });
});

describe('restoring archives other tools made', () => {
  let base: string;
  let src: string;
  beforeAll(async () => {
    base = await mkdtemp(join(tmpdir(), 'archive-gnu-'));
    src = join(base, 'src');
    await buildWorkspace(src);
  });
  afterAll(() => rm(base, { recursive: true, force: true }));

  // GNU format writes long names as 'L'/'K' entries, pax as 'x' headers; both deflated at the default level.
  it.each(['gnu', 'pax'])('`tar czf --format=%s -C dir .` (deflated, ./ names) restores to the same tree', async (format) => {
    const archive = join(base, `${format}.tgz`);
    execFileSync('tar', [`--format=${format}`, '-czf', archive, '-C', src, '.']);
    const out = join(base, `${format}-out`);
    const summary = await restoreArchive(createReadStream(archive), out);
    expect(await describeTree(out)).toEqual(await describeTree(src));
    expect(summary).toMatchObject({ files: 8, symlinks: 4 });
  });

  it('a GNU hard link restores as a link to the file restored before it', async () => {
    const dir = join(base, 'hard');
    await mkdir(dir);
    await writeFile(join(dir, 'a.txt'), 'shared');
    execFileSync('ln', [join(dir, 'a.txt'), join(dir, 'b.txt')]);
    const archive = join(base, 'hard.tgz');
    execFileSync('tar', ['-czf', archive, '-C', dir, 'a.txt', 'b.txt']);
    const out = join(base, 'hard-out');
    expect(await restoreArchive(createReadStream(archive), out)).toMatchObject({ files: 2, bytes: 6 });
    expect((await stat(join(out, 'b.txt'))).ino).toBe((await stat(join(out, 'a.txt'))).ino);
  });
});

async function streamToBuffer(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}
