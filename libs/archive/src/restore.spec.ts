import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, readlink, rm, stat, symlink, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline, Readable } from 'node:stream';
import { createGzip, gzipSync } from 'node:zlib';
import { ArchiveRefused, restoreArchive, type RefusalReason } from './restore';

// ---------------------------------------------------------------------------------------------------
// Hostile archives, written block by block: nothing here goes through our packer.
// ---------------------------------------------------------------------------------------------------

interface RawEntry {
  name: string;
  /** tar typeflag: '0' file, '1' hard link, '2' symlink, '3'/'4' devices, '5' dir, '6' fifo, 'x' pax, ... */
  type?: string;
  mode?: number;
  data?: Buffer | string;
  /** Overrides the size field (a header that promises more data than follows). */
  size?: number;
  linkname?: string;
}

/** One ustar header block with a correct checksum. */
function ustarHeader(e: RawEntry, size: number): Buffer {
  const block = Buffer.alloc(512);
  block.write(e.name, 0, 100);
  block.write(`${(e.mode ?? 0o644).toString(8).padStart(7, '0')}\0`, 100);
  block.write('0000000\0', 108);
  block.write('0000000\0', 116);
  block.write(`${size.toString(8).padStart(11, '0')}\0`, 124);
  block.write(`${(1_700_000_000).toString(8).padStart(11, '0')}\0`, 136);
  block.write(e.type ?? '0', 156);
  block.write(e.linkname ?? '', 157, 100);
  block.write('ustar\u000000', 257, 'latin1');
  block.fill(0x20, 148, 156);
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
  return block;
}

/** The tar bytes of the entries plus the end-of-archive blocks (not gzipped). */
function tarOf(entries: RawEntry[]): Buffer {
  const parts: Buffer[] = [];
  for (const e of entries) {
    const data = Buffer.from(e.data ?? '');
    parts.push(ustarHeader(e, e.size ?? data.length), data, Buffer.alloc((512 - (data.length % 512)) % 512));
  }
  parts.push(Buffer.alloc(1024));
  return Buffer.concat(parts);
}

const gz = (entries: RawEntry[]) => gzipSync(tarOf(entries));
const pax = (records: Record<string, string>, type: 'x' | 'g' = 'x'): RawEntry => {
  const body = Object.entries(records)
    .map(([k, v]) => {
      const rest = ` ${k}=${v}\n`;
      let len = Buffer.byteLength(rest) + 1;
      while (String(len).length + Buffer.byteLength(rest) !== len) len++;
      return `${len}${rest}`;
    })
    .join('');
  return { name: `PaxHeaders/${type}`, type, data: body };
};

/** A pax record of exactly `bytes` bytes: `<len> <key>=<filler>\n`. */
function paxRecordOf(key: string, bytes: number): Buffer {
  const head = `${bytes} ${key}=`;
  return Buffer.concat([Buffer.from(head), Buffer.alloc(bytes - head.length - 1, 'a'), Buffer.from('\n')]);
}

/**
 * The archive of issue 16's finding 8: `records` pax headers of 1 MiB each, every one under a key of
 * its own so a reader that keeps them all holds `records` MiB, then one small file they would describe.
 * Generated and gzip'd as it is read, never held whole; `made()` says how many pax headers the reader
 * pulled out of the generator, so a test can tell how far a restore read before it stopped.
 */
function paxFlood(records: number, { perEntry = records }: { perEntry?: number } = {}): { stream: Readable; made: () => number } {
  const MiB = 1024 * 1024;
  let made = 0;
  function* blocks(): Generator<Buffer> {
    for (let i = 0; i < records; i++) {
      yield ustarHeader({ name: `PaxHeaders/${i}`, type: 'x' }, MiB);
      yield paxRecordOf(`comment.${i}`, MiB);
      made++;
      if ((i + 1) % perEntry === 0) yield* [ustarHeader({ name: `f${i}` }, 1), Buffer.from('x'), Buffer.alloc(511)];
    }
    yield* [ustarHeader({ name: 'last' }, 1), Buffer.from('x'), Buffer.alloc(511), Buffer.alloc(1024)];
  }
  const stream = pipeline(Readable.from(blocks()), createGzip({ level: 1 }), () => {});
  return { stream, made: () => made };
}

/** The bytes in use: the JS heap plus Buffers' memory outside it. */
const inUse = () => {
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
};

// ---------------------------------------------------------------------------------------------------

describe('restoring a hostile archive', () => {
  let base: string;
  let target: string;
  /** A file beside the target, where an escaping entry would land. */
  let outside: string;
  beforeEach(async () => {
    base = await mkdtemp(join(tmpdir(), 'restore-'));
    target = join(base, 'ws');
    outside = join(base, 'outside.txt');
    await writeFile(outside, 'original');
  });
  afterEach(() => rm(base, { recursive: true, force: true }));

  /** Refused with `reason` naming `entry`, and nothing was written anywhere: no target, no staging left, `outside` intact. */
  async function expectRefused(archive: Buffer, reason: RefusalReason, entry: string | RegExp, options = {}): Promise<void> {
    const err = await restoreArchive(Readable.from([archive]), target, options).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ArchiveRefused);
    expect((err as ArchiveRefused).reason).toBe(reason);
    expect((err as ArchiveRefused).entry).toEqual(typeof entry === 'string' ? entry : expect.stringMatching(entry));
    expect(await readdir(base)).toEqual(['outside.txt']);
    expect(await readFile(outside, 'utf8')).toBe('original');
  }

  it('a well-formed raw archive restores (the helper is sound)', async () => {
    await restoreArchive(Readable.from([gz([{ name: 'd', type: '5', mode: 0o755 }, { name: 'd/a.txt', data: 'hello' }])]), target);
    expect(await readFile(join(target, 'd/a.txt'), 'utf8')).toBe('hello');
  });

  it('absolute_path: an absolute name', async () => {
    await expectRefused(gz([{ name: outside, data: 'pwned' }]), 'absolute_path', outside);
  });

  it('path_escape: a `..` component', async () => {
    await expectRefused(gz([{ name: '../outside.txt', data: 'pwned' }]), 'path_escape', '../outside.txt');
    await expectRefused(gz([{ name: 'a/b/../../../outside.txt', data: 'pwned' }]), 'path_escape', 'a/b/../../../outside.txt');
  });

  it('path_escape: a `..` hidden in a pax path', async () => {
    await expectRefused(gz([pax({ path: '../outside.txt' }), { name: 'innocent.txt', data: 'pwned' }]), 'path_escape', '../outside.txt');
  });

  it('link_escape: a symlink to an absolute path', async () => {
    await expectRefused(gz([{ name: 'l', type: '2', linkname: outside }]), 'link_escape', 'l');
  });

  it('link_escape: a symlink that climbs out of the tree', async () => {
    await expectRefused(gz([{ name: 'a', type: '5' }, { name: 'a/l', type: '2', linkname: '../../outside.txt' }]), 'link_escape', 'a/l');
  });

  it('link_escape: `..` after a name, which a later link could turn outward', async () => {
    // `dot -> .` is harmless alone, but would make `up -> dot/..` the target's parent.
    await expectRefused(gz([{ name: 'dot', type: '2', linkname: '.' }, { name: 'up', type: '2', linkname: 'dot/..' }]), 'link_escape', 'up');
  });

  it('link_escape: a hard link to anything but a file restored before it', async () => {
    await expectRefused(gz([{ name: 'h', type: '1', linkname: outside }]), 'link_escape', 'h');
    await expectRefused(gz([{ name: 'h', type: '1', linkname: '../outside.txt' }]), 'link_escape', 'h');
    await expectRefused(gz([{ name: 'h', type: '1', linkname: 'later.txt' }, { name: 'later.txt', data: 'x' }]), 'link_escape', 'h');
  });

  it('through_link: an entry written beneath a symlink the archive made', async () => {
    await expectRefused(
      gz([{ name: 'sub', type: '5' }, { name: 'l', type: '2', linkname: 'sub' }, { name: 'l/x.txt', data: 'via link' }]),
      'through_link',
      'l/x.txt',
    );
  });

  it('device_file: character and block devices, and fifos', async () => {
    await expectRefused(gz([{ name: 'tty', type: '3' }]), 'device_file', 'tty');
    await expectRefused(gz([{ name: 'sda', type: '4' }]), 'device_file', 'sda');
    await expectRefused(gz([{ name: 'pipe', type: '6' }]), 'device_file', 'pipe');
  });

  it('setuid: setuid or setgid bits on a file or directory', async () => {
    await expectRefused(gz([{ name: 'su', mode: 0o4755, data: '#!/bin/sh' }]), 'setuid', 'su');
    await expectRefused(gz([{ name: 'sg', type: '5', mode: 0o2775 }]), 'setuid', 'sg');
  });

  it('too_large: more file data than maxBytes', async () => {
    await expectRefused(gz([{ name: 'a', data: 'x'.repeat(600) }, { name: 'b', data: 'x'.repeat(600) }]), 'too_large', 'b', { maxBytes: 1000 });
  });

  it('too_large: a gzip bomb of end-of-archive padding', async () => {
    const bomb = gzipSync(Buffer.concat([tarOf([{ name: 'a', data: 'x' }]), Buffer.alloc(64 * 1024 * 1024)]));
    await expectRefused(bomb, 'too_large', 'a', { maxBytes: 1000, maxEntries: 10 });
  });

  it('too_much_metadata: 150 pax headers of 1 MiB for one entry are refused early, without holding them (finding 8)', async () => {
    (global as { gc?: () => void }).gc?.();
    const before = inUse();
    let peak = before;
    const sampler = setInterval(() => (peak = Math.max(peak, inUse())), 5);
    const flood = paxFlood(150);
    const started = Date.now();
    const err = await restoreArchive(flood.stream, target).then(
      () => undefined,
      (e: unknown) => e,
    );
    clearInterval(sampler);
    peak = Math.max(peak, inUse());
    expect(err).toBeInstanceOf(ArchiveRefused);
    expect((err as ArchiveRefused).reason).toBe('too_much_metadata');
    // Stopped at the second 1 MiB header; the stream's read-ahead (up to 16 chunks buffered, 8 headers)
    // generates a few more (5 when measured): a handful of the 150, never most of them.
    expect(flood.made()).toBeLessThan(20);
    expect(Date.now() - started).toBeLessThan(10_000);
    // Without the cap this holds all 150 MiB of records (1.25 GB in the finding); with it a few MiB.
    expect(peak - before).toBeLessThan(100 * 1024 * 1024);
    expect(await readdir(base)).toEqual(['outside.txt']);
  });

  it('too_much_metadata: one pax header past the per-entry cap', async () => {
    await expectRefused(gz([pax({ comment: 'x'.repeat(1024 * 1024) }), { name: 'a', data: 'a' }]), 'too_much_metadata', '');
  });

  it('too_much_metadata: pax and GNU long-name headers for one entry count together', async () => {
    const long = (type: 'L' | 'K') => ({ name: '././@LongLink', type, data: `${'n'.repeat(400 * 1024)}\0` });
    await expectRefused(gz([pax({ comment: 'c'.repeat(400 * 1024) }), long('L'), long('K'), { name: 'a', data: 'a' }]), 'too_much_metadata', '');
  });

  it('too_much_metadata: pax headers of 1 MiB on many entries, past the total for the archive', async () => {
    // Each entry's headers are within the per-entry cap; their sum is what is refused.
    const flood = paxFlood(80, { perEntry: 1 });
    const err = await restoreArchive(flood.stream, target).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ArchiveRefused);
    expect((err as ArchiveRefused).reason).toBe('too_much_metadata');
    expect(flood.made()).toBeLessThan(80);
    expect(await readdir(base)).toEqual(['outside.txt']);
  });

  it('too_many_entries: more entries than maxEntries', async () => {
    await expectRefused(gz(['a', 'b', 'c', 'd'].map((name) => ({ name, data: name }))), 'too_many_entries', 'd', { maxEntries: 3 });
  });

  it('corrupt: a header whose checksum is wrong', async () => {
    const tar = tarOf([{ name: 'a.txt', data: 'hello' }]);
    tar[0] = 'b'.charCodeAt(0); // the name changes, the checksum does not
    await expectRefused(gzipSync(tar), 'corrupt', '');
  });

  it('corrupt: a truncated gzip stream', async () => {
    const whole = gz([{ name: 'a.txt', data: 'x'.repeat(100_000) }]);
    await expectRefused(whole.subarray(0, whole.length - 200), 'corrupt', /a\.txt|^$/);
  });

  it('corrupt: a tar that ends inside a file', async () => {
    const tar = tarOf([{ name: 'a.txt', data: 'short', size: 4096 }]);
    await expectRefused(gzipSync(tar.subarray(0, 512 + 512)), 'corrupt', 'a.txt');
  });

  it('corrupt: a gzip CRC that does not match', async () => {
    const bytes = gz([{ name: 'a.txt', data: 'hello' }]);
    bytes[bytes.length - 8] ^= 0xff;
    await expectRefused(bytes, 'corrupt', /.*/);
  });

  it('corrupt: not gzip at all', async () => {
    await expectRefused(tarOf([{ name: 'a.txt', data: 'plain tar' }]), 'corrupt', '');
  });

  it('unsupported_entry: an entry kind we do not restore (GNU sparse file)', async () => {
    await expectRefused(gz([{ name: 'sparse', type: 'S', data: 'x' }]), 'unsupported_entry', 'sparse');
  });

  it('unsupported_entry: a file that would replace a directory', async () => {
    await expectRefused(gz([{ name: 'd', type: '5' }, { name: 'd/a', data: 'a' }, { name: 'd', data: 'file now' }]), 'unsupported_entry', 'd');
  });
});

describe('restoring into a target', () => {
  let base: string;
  beforeEach(async () => {
    base = await mkdtemp(join(tmpdir(), 'restore-target-'));
  });
  afterEach(() => rm(base, { recursive: true, force: true }));

  it('takes over an empty directory', async () => {
    await mkdir(join(base, 'ws'));
    await restoreArchive(Readable.from([gz([{ name: 'a.txt', data: 'a' }])]), join(base, 'ws'));
    expect(await readdir(join(base, 'ws'))).toEqual(['a.txt']);
  });

  it('refuses a directory that is not empty, before reading anything', async () => {
    await mkdir(join(base, 'ws'));
    await writeFile(join(base, 'ws', 'keep.txt'), 'keep');
    await expect(restoreArchive(Readable.from([gz([{ name: 'a.txt', data: 'a' }])]), join(base, 'ws'))).rejects.toThrow(/not empty/);
    expect(await readdir(join(base, 'ws'))).toEqual(['keep.txt']);
  });

  it('ignores pax global headers and takes path and mtime from a pax extended header', async () => {
    const archive = gz([pax({ comment: 'global', path: 'not-this.txt' }, 'g'), pax({ mtime: '1600000000.75', path: 'named-by-pax.txt' }), { name: 'x', data: 'pax' }]);
    await restoreArchive(Readable.from([archive]), join(base, 'ws'));
    expect(await readdir(join(base, 'ws'))).toEqual(['named-by-pax.txt']);
    expect(await readFile(join(base, 'ws', 'named-by-pax.txt'), 'utf8')).toBe('pax');
    expect((await stat(join(base, 'ws', 'named-by-pax.txt'))).mtimeMs).toBe(1_600_000_000_000);
  });

  it('GNU tar --format=posix (a pax header on every entry: long paths, a long link, sub-second mtimes) still restores', async () => {
    // Every entry gets atime/ctime/mtime records, and the long names a path record: the metadata caps
    // must leave an ordinary archive of many entries alone.
    const src = join(base, 'src');
    const deep = Array.from({ length: 12 }, (_, i) => `directory-with-a-long-name-${i}`).join('/');
    await mkdir(join(src, deep), { recursive: true });
    for (let i = 0; i < 300; i++) await writeFile(join(src, deep, `file-${i}.txt`), `file ${i}`);
    await symlink(`${deep}/file-0.txt`, join(src, 'long-link'));
    await utimes(join(src, deep, 'file-1.txt'), 1_600_000_000.25, 1_600_000_000.25);
    const archive = join(base, 'posix.tgz');
    execFileSync('tar', ['--format=posix', '-czf', archive, '-C', src, '.']);

    const summary = await restoreArchive(Readable.from([await readFile(archive)]), join(base, 'ws'));
    expect(summary).toMatchObject({ files: 300, symlinks: 1, dirs: 12 });
    expect(await readFile(join(base, 'ws', deep, 'file-299.txt'), 'utf8')).toBe('file 299');
    expect(await readlink(join(base, 'ws', 'long-link'))).toBe(`${deep}/file-0.txt`);
    expect((await stat(join(base, 'ws', deep, 'file-1.txt'))).mtimeMs).toBe(1_600_000_000_000);
  });

  it('metadata right at the per-entry cap (pax and a GNU long name together) still restores', async () => {
    const MiB = 1024 * 1024;
    const name = `${'n'.repeat(200)}.txt`;
    // 1 MiB exactly: the pax data and the long name's 1 KiB.
    const records = paxRecordOf('comment', MiB - 1024);
    const archive = gzipSync(
      Buffer.concat([
        ustarHeader({ name: 'PaxHeaders/x', type: 'x' }, records.length),
        records,
        Buffer.alloc((512 - (records.length % 512)) % 512),
        tarOf([{ name: '././@LongLink', type: 'L', data: `${name}\0`.padEnd(1024, '\0') }, { name: 'short', data: 'at the cap' }]),
      ]),
    );
    await restoreArchive(Readable.from([archive]), join(base, 'ws'));
    expect(await readFile(join(base, 'ws', name), 'utf8')).toBe('at the cap');
  });

  it('passes on an error of the source stream as it is', async () => {
    const failing = new Readable({
      read() {
        this.destroy(new Error('connection reset'));
      },
    });
    await expect(restoreArchive(failing, join(base, 'ws'))).rejects.toThrow('connection reset');
    expect(await readdir(base)).toEqual([]);
  });
});
