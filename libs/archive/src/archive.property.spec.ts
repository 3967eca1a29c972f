/**
 * Property tests of the archive writer and readers: any generated tree packs and comes back the same
 * (restored, listed, read file by file), and any hostile entry, link, corruption or cut is refused with
 * nothing left behind.
 */
import * as fc from 'fast-check';
import { lstat, lutimes, mkdir, mkdtemp, readdir, readFile, readlink, realpath, rm, symlink, chmod, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, posix, sep } from 'node:path';
import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { ArchiveFileNotFound, BadArchivePath, checkArchivePath, listArchive, normalArchivePath, openArchiveFile, type ArchiveEntry } from './archive-view';
import { packDirectory } from './pack';
import { ArchiveRefused, restoreArchive, type RefusalReason, type RestoreOptions } from './restore';

// Each property packs and restores real archives on disk, tens of times: seconds on a busy machine.
jest.setTimeout(60_000);

// ---------------------------------------------------------------------------------------------------
// Generated trees.
// ---------------------------------------------------------------------------------------------------

type Node =
  | { kind: 'file'; data: Uint8Array; mode: number; mtime: number }
  | { kind: 'dir'; mode: number; mtime: number; children: [string, Node][] }
  /** Relative, inside the tree by construction: `ups` is clamped to the link's depth when it is written. */
  | { kind: 'symlink'; ups: number; names: string[]; mtime: number };

/** Any name a directory can hold: any code point but `/` and NUL, never `.` or `..`; a few long ones (pax paths). */
const shortName = fc.string({ unit: 'binary', minLength: 1, maxLength: 8 }).filter((n) => !/[/\0]/.test(n) && n !== '.' && n !== '..');
const longName = fc.string({ unit: 'grapheme-ascii', minLength: 90, maxLength: 140 }).filter((n) => !n.includes('/') && n !== '.' && n !== '..');
const name = fc.oneof({ weight: 6, arbitrary: shortName }, { weight: 1, arbitrary: longName });
// Whole seconds up to 2038, so any filesystem keeps them.
const mtime = fc.integer({ min: 0, max: 2 ** 31 - 1 });
/** Small, and around the 512-byte block: empty, mid-block, exactly a block, just past one. */
const data = fc.oneof(fc.uint8Array({ maxLength: 40 }), fc.constantFrom(511, 512, 513, 1024).chain((n) => fc.uint8Array({ minLength: n, maxLength: n })));
// The owner may always read (and search a directory), so packing works without root; the rest is free.
const fileMode = fc.integer({ min: 0, max: 0o377 }).map((m) => 0o400 | m);
const dirMode = fc.integer({ min: 0, max: 0o077 }).map((m) => 0o700 | m);

const { tree } = fc.letrec<{ tree: [string, Node][]; node: Node }>((tie) => ({
  tree: fc.uniqueArray(fc.tuple(name, tie('node')), { maxLength: 4, selector: ([n]) => n, depthIdentifier: 'tree' }),
  node: fc.oneof(
    { depthSize: 'small', depthIdentifier: 'tree' },
    fc.record({ kind: fc.constant('file' as const), data, mode: fileMode, mtime }),
    fc.record({ kind: fc.constant('symlink' as const), ups: fc.nat(3), names: fc.array(shortName, { minLength: 1, maxLength: 2 }), mtime }),
    fc.record({ kind: fc.constant('dir' as const), mode: dirMode, mtime, children: tie('tree') as fc.Arbitrary<[string, Node][]> }),
  ),
}));

/** What an entry should be after a round trip, by relative path. */
interface Expected {
  type: 'file' | 'dir' | 'symlink';
  mode?: number;
  mtime: number;
  data?: Buffer;
  target?: string;
}

/** The tree in pack's order (depth first, names sorted, a directory before its contents) with what each entry is. */
function expectedOf(children: [string, Node][], rel = ''): [string, Expected][] {
  const depth = rel === '' ? 1 : rel.split('/').length + 1;
  return [...children]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .flatMap(([n, node]): [string, Expected][] => {
      const path = rel ? `${rel}/${n}` : n;
      if (node.kind === 'file') return [[path, { type: 'file', mode: node.mode, mtime: node.mtime, data: Buffer.from(node.data) }]];
      if (node.kind === 'symlink') return [[path, { type: 'symlink', mtime: node.mtime, target: linkTarget(node, depth) }]];
      return [[path, { type: 'dir', mode: node.mode, mtime: node.mtime }], ...expectedOf(node.children, path)];
    });
}

const linkTarget = (node: { ups: number; names: string[] }, depth: number) => [...Array<string>(Math.min(node.ups, depth - 1)).fill('..'), ...node.names].join('/');

/** Writes the tree; modes and mtimes last, deepest first, so writing a child moves no parent's. */
async function materialise(root: string, children: [string, Node][]): Promise<void> {
  const expected = expectedOf(children);
  for (const [path, e] of expected) {
    const full = join(root, path);
    if (e.type === 'dir') await mkdir(full, { mode: 0o700 });
    else if (e.type === 'file') await writeFile(full, e.data!);
    else await symlink(e.target!, full);
  }
  for (const [path, e] of [...expected].reverse()) {
    const full = join(root, path);
    if (e.type === 'symlink') await lutimes(full, e.mtime, e.mtime);
    else {
      await chmod(full, e.mode!);
      await utimes(full, e.mtime, e.mtime);
    }
  }
}

/** What is on disk under `root`, as Expected. */
async function onDisk(root: string, rel = ''): Promise<[string, Expected][]> {
  const out: [string, Expected][] = [];
  for (const n of (await readdir(join(root, rel))).sort()) {
    const path = rel ? `${rel}/${n}` : n;
    const full = join(root, path);
    const s = await lstat(full);
    const mtime = Math.floor(s.mtimeMs / 1000);
    if (s.isSymbolicLink()) out.push([path, { type: 'symlink', mtime, target: await readlink(full) }]);
    else if (s.isDirectory()) out.push([path, { type: 'dir', mode: s.mode & 0o777, mtime }], ...(await onDisk(root, path)));
    else out.push([path, { type: 'file', mode: s.mode & 0o777, mtime, data: await readFile(full) }]);
  }
  return out;
}

const packed = async (dir: string) => Buffer.concat((await packDirectory(dir).toArray()) as Buffer[]);

/**
 * Each property does real file I/O: generous limits, so a slow machine does not fail a passing property,
 * and a failing one stops shrinking in time to report its counterexample.
 */
const TIMEOUT_MS = 90_000;
const limits = (numRuns: number) => ({ numRuns, interruptAfterTimeLimit: 60_000 });

let base: string;
let runNo = 0;
beforeAll(async () => {
  base = await mkdtemp(join(tmpdir(), 'archive-props-'));
});
afterAll(() => rm(base, { recursive: true, force: true }));

/** A fresh directory for one run of a property, and a file beside its targets that an escape would reach. */
async function scratch(): Promise<{ dir: string; outside: string }> {
  const dir = join(base, String(runNo++));
  await mkdir(dir);
  const outside = join(dir, 'outside.txt');
  await writeFile(outside, 'original');
  return { dir, outside };
}

// ---------------------------------------------------------------------------------------------------

describe('pack, restore and view round-trip any tree (properties)', () => {
  it('restore gives the same paths, kinds, modes, mtimes, bytes and link targets; packing is deterministic', async () => {
    await fc.assert(
      fc.asyncProperty(tree, async (children) => {
        const { dir } = await scratch();
        const src = join(dir, 'src');
        await mkdir(src);
        await materialise(src, children);
        const archive = await packed(src);
        expect((await packed(src)).equals(archive)).toBe(true);

        const summary = await restoreArchive(Readable.from([archive]), join(dir, 'dst'));
        const expected = expectedOf(children);
        expect(await onDisk(join(dir, 'dst'))).toEqual(expected);
        const count = (type: Expected['type']) => expected.filter(([, e]) => e.type === type).length;
        expect(summary).toEqual({ files: count('file'), dirs: count('dir'), symlinks: count('symlink'), bytes: expected.reduce((n, [, e]) => n + (e.data?.length ?? 0), 0) });
        await rm(dir, { recursive: true });
      }),
      limits(25),
    );
  }, TIMEOUT_MS);

  it('the listing, page by page, is every entry once in order; each file reads back as its bytes', async () => {
    await fc.assert(
      fc.asyncProperty(tree, fc.integer({ min: 1, max: 5 }), async (children, limit) => {
        const { dir } = await scratch();
        const src = join(dir, 'src');
        await mkdir(src);
        await materialise(src, children);
        const archive = await packed(src);
        const listed: ArchiveEntry[] = [];
        for (let after: number | undefined; ; ) {
          const page = await listArchive(Readable.from([archive]), { limit, ...(after === undefined ? {} : { after }) });
          listed.push(...page.entries);
          if (page.next_after === undefined) break;
          expect(page.entries).toHaveLength(limit);
          after = Number(page.next_after);
        }
        const expected = expectedOf(children);
        expect(listed.map((e) => [e.path, e.type, e.size, e.type === 'symlink' ? undefined : e.mode, e.mtime, e.link])).toEqual(
          expected.map(([path, e]) => [path, e.type, e.data?.length ?? 0, e.mode, new Date(e.mtime * 1000).toISOString(), e.target]),
        );
        for (const [path, e] of expected) {
          // A file reads back as its bytes; anything else is not found as a file.
          const read = await openArchiveFile(Readable.from([archive]), `./${path}`, 10_000).then(
            async ({ data: bytes }) => {
              const chunks: Buffer[] = [];
              for await (const chunk of bytes) chunks.push(chunk);
              return Buffer.concat(chunks);
            },
            (err: unknown) => err,
          );
          expect({ path, read: read instanceof Buffer ? read.equals(e.data!) : read instanceof ArchiveFileNotFound ? 'not found' : read }).toEqual({
            path,
            read: e.type === 'file' ? true : 'not found',
          });
        }
        await rm(dir, { recursive: true });
      }),
      limits(15),
    );
  }, TIMEOUT_MS);
});

// ---------------------------------------------------------------------------------------------------
// Hostile archives, block by block (nothing of ours writes them).
// ---------------------------------------------------------------------------------------------------

interface RawEntry {
  name: string;
  /** tar typeflag: '0' file, '1' hard link, '2' symlink, '3'/'4' devices, '5' dir, '6' fifo, ... */
  type: string;
  mode?: number;
  data?: string;
  /** The size the header claims, when it is not the data's. */
  size?: number;
  linkname?: string;
}

function ustarHeader(e: RawEntry, size: number): Buffer {
  const block = Buffer.alloc(512);
  block.write(e.name, 0, 100);
  block.write(`${(e.mode ?? 0o644).toString(8).padStart(7, '0')}\0`, 100);
  block.write('0000000\0', 108);
  block.write('0000000\0', 116);
  block.write(`${size.toString(8).padStart(11, '0')}\0`, 124);
  block.write(`${(1_700_000_000).toString(8).padStart(11, '0')}\0`, 136);
  block.write(e.type, 156);
  block.write(e.linkname ?? '', 157, 100);
  block.write('ustar\u000000', 257, 'latin1');
  block.fill(0x20, 148, 156);
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
  return block;
}

function rawTarGz(entries: RawEntry[]): Buffer {
  const parts: Buffer[] = [];
  for (const e of entries) {
    const bytes = Buffer.from(e.data ?? '');
    parts.push(ustarHeader(e, e.size ?? bytes.length), bytes, Buffer.alloc((512 - (bytes.length % 512)) % 512));
  }
  parts.push(Buffer.alloc(1024));
  return gzipSync(Buffer.concat(parts));
}

const component = fc.constantFrom('a', 'b', 'c', 'd.txt', 'e f');
const relPath = fc.array(component, { minLength: 1, maxLength: 3 }).map((parts) => parts.join('/'));
/** Harmless entries that go before or after the hostile ones, each in a directory of its own, so they never collide. */
const benign = (tag: string) =>
  fc.array(relPath, { maxLength: 3 }).map((paths) => paths.map((p, i): RawEntry => (i % 2 === 0 ? { name: `${tag}${i}/${p}`, type: '0', data: p } : { name: `${tag}${i}/${p}`, type: '5', mode: 0o755 })));

interface Hostile {
  entries: RawEntry[];
  reason: RefusalReason;
  /** The entry the refusal names. */
  entry: string;
  options?: RestoreOptions;
}

const ups = (n: number) => Array<string>(n).fill('..');
const hostile: fc.Arbitrary<Hostile> = fc.oneof(
  // An absolute name.
  relPath.map((p) => ({ entries: [{ name: `/${p}`, type: '0', data: 'pwned' }], reason: 'absolute_path' as const, entry: `/${p}` })),
  // `..` anywhere in a name, even where it would land inside.
  fc.tuple(fc.array(component, { maxLength: 3 }), fc.nat(), fc.constantFrom('0', '5', '2')).map(([parts, at, type]) => {
    const withUp = [...parts];
    withUp.splice(at % (parts.length + 1), 0, '..');
    const n = [...withUp, 'x'].join('/');
    return { entries: [{ name: n, type, data: type === '0' ? 'pwned' : '', linkname: type === '2' ? 'x' : '' }], reason: 'path_escape' as const, entry: n };
  }),
  // A symbolic link that climbs out, is absolute, or has `..` after a name.
  fc.tuple(fc.array(component, { minLength: 1, maxLength: 3 }), fc.nat(3), fc.array(component, { minLength: 1, maxLength: 2 }), fc.constantFrom('climb', 'absolute', 'after-a-name')).map(([parts, extra, names, how]) => {
    const n = ['l', ...parts].join('/');
    const depth = parts.length + 1;
    const target = how === 'climb' ? [...ups(depth + extra), ...names].join('/') : how === 'absolute' ? `/${names.join('/')}` : [...names, ...ups(1 + extra)].join('/');
    return { entries: [{ name: n, type: '2', linkname: target }], reason: 'link_escape' as const, entry: n };
  }),
  // A hard link to anything but a file restored before it.
  fc.constantFrom('/etc/passwd', '../outside.txt', 'later.txt', 'd', 'd/../outside.txt').map((target) => ({
    entries: [{ name: 'd', type: '5' }, { name: 'h', type: '1', linkname: target }, { name: 'later.txt', type: '0', data: 'x' }],
    reason: 'link_escape' as const,
    entry: 'h',
  })),
  // An entry beneath a link the archive made, even one that points inside.
  fc.tuple(fc.constantFrom('.', 'sub', 'sub/x', 'nowhere'), relPath, fc.constantFrom('0', '5', '2')).map(([target, p, type]) => ({
    entries: [{ name: 'sub', type: '5' }, { name: 'via', type: '2', linkname: target }, { name: `via/${p}`, type, data: type === '0' ? 'pwned' : '', linkname: type === '2' ? 'x' : '' }],
    reason: 'through_link' as const,
    entry: `via/${p}`,
  })),
  // Devices and fifos.
  fc.tuple(relPath, fc.constantFrom('3', '4', '6')).map(([p, type]) => ({ entries: [{ name: `dev/${p}`, type }], reason: 'device_file' as const, entry: `dev/${p}` })),
  // setuid or setgid, on a file or a directory.
  fc.tuple(relPath, fc.constantFrom(0o4000, 0o2000, 0o6000), fc.constantFrom('0', '5')).map(([p, bit, type]) => ({
    entries: [{ name: `s/${p}`, type, mode: 0o755 | bit, data: type === '0' ? '#!/bin/sh' : '' }],
    reason: 'setuid' as const,
    entry: `s/${p}`,
  })),
  // Entry kinds we do not restore.
  fc.tuple(relPath, fc.constantFrom('S', 'V', 'M', 'N', 'D', 'A', 'Z', '8')).map(([p, type]) => ({ entries: [{ name: `u/${p}`, type, data: 'x' }], reason: 'unsupported_entry' as const, entry: `u/${p}` })),
  // A header that claims more data than the limit (up to the largest ustar size), with none behind it.
  fc.integer({ min: 1001, max: 0o77777777777 }).map((size) => ({ entries: [{ name: 'big', type: '0', size }], reason: 'too_large' as const, entry: 'big', options: { maxBytes: 1000 } })),
  // More entries than the limit.
  fc.integer({ min: 1, max: 4 }).map((max) => ({
    entries: Array.from({ length: max + 1 }, (_, i) => ({ name: `n${i}`, type: '0', data: 'x' })),
    reason: 'too_many_entries' as const,
    entry: `n${max}`,
    options: { maxEntries: max },
  })),
);

/** Refused, and nothing written anywhere: no target, no staging directory, the file outside intact. */
async function expectRefusedCleanly(archive: Buffer, dir: string, outside: string, options: RestoreOptions = {}): Promise<ArchiveRefused> {
  const err = await restoreArchive(Readable.from([archive]), join(dir, 'ws'), options).then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof ArchiveRefused)) throw new Error(`expected a refusal, got ${err === undefined ? 'a restore' : String(err)}`);
  expect((await readdir(dir)).sort()).toEqual(['outside.txt']);
  expect(await readFile(outside, 'utf8')).toBe('original');
  return err;
}

describe('hostile archives are refused, whatever surrounds them (properties)', () => {
  it('each kind of hostile entry is refused with its reason, naming it, and nothing is left behind', async () => {
    await fc.assert(
      fc.asyncProperty(benign('before'), hostile, benign('after'), async (before, bad, after) => {
        const { dir, outside } = await scratch();
        // The entries before the hostile ones count against an entry limit too (their data is far below a byte limit).
        const options = bad.options?.maxEntries === undefined ? bad.options : { maxEntries: bad.options.maxEntries + before.length };
        const err = await expectRefusedCleanly(rawTarGz([...before, ...bad.entries, ...after]), dir, outside, options);
        expect({ reason: err.reason, entry: err.entry }).toEqual({ reason: bad.reason, entry: bad.entry });
        await rm(dir, { recursive: true });
      }),
      limits(40),
    );
  }, TIMEOUT_MS);

  it('links in any order never resolve outside the tree: a restore either refuses or every link stays inside', async () => {
    const entry = fc.oneof(
      relPath.map((p): RawEntry => ({ name: p, type: '5' })),
      relPath.map((p): RawEntry => ({ name: p, type: '0', data: 'x' })),
      fc.tuple(relPath, fc.array(fc.constantFrom('..', '.', 'a', 'b', ''), { minLength: 1, maxLength: 4 })).map(([p, t]): RawEntry => ({ name: p, type: '2', linkname: t.join('/') })),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(entry, { minLength: 1, maxLength: 8 }), async (entries) => {
        const { dir, outside } = await scratch();
        const target = join(dir, 'ws');
        const restored = await restoreArchive(Readable.from([rawTarGz(entries)]), target).then(
          () => true,
          (e: unknown) => {
            if (!(e instanceof ArchiveRefused)) throw e;
            return false;
          },
        );
        // Refused: nothing was written beside the tree (only the file the test put there).
        expect(restored ? 'restored' : (await readdir(dir)).sort()).toEqual(restored ? 'restored' : ['outside.txt']);
        if (restored) {
          const root = await realpath(target);
          for (const [path, e] of await onDisk(target)) {
            if (e.type === 'symlink' && !(await staysInside(root, join(target, path)))) throw new Error(`${path} -> ${e.target} resolves outside the tree`);
          }
        }
        expect(await readFile(outside, 'utf8')).toBe('original');
        await rm(dir, { recursive: true });
      }),
      limits(40),
    );
  }, TIMEOUT_MS);
});

/**
 * Whether resolving the link at `link` (following links it passes through, as the kernel would, and
 * names that do not exist as plain names) stays within `root` at every step.
 */
async function staysInside(root: string, link: string): Promise<boolean> {
  const inside = (parts: string[]) => parts.join(sep) === root || parts.join(sep).startsWith(root + sep);
  const current = (await realpath(dirname(link))).split(sep);
  let pending = [link.split(sep).pop()!];
  for (let hops = 0; pending.length > 0; ) {
    const part = pending.shift()!;
    if (part === '' || part === '.') continue;
    if (part === '..') current.pop();
    else {
      const next = [...current, part].join(sep);
      const s = await lstat(next).catch(() => undefined);
      if (s?.isSymbolicLink()) {
        if (++hops > 40) return true; // a loop: the kernel gives up (ELOOP) without leaving
        const target = await readlink(next);
        if (target.startsWith('/')) return false;
        pending = [...target.split('/'), ...pending];
        continue;
      }
      current.push(part);
    }
    if (!inside(current)) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------------

describe('a damaged archive restores the same or not at all (properties)', () => {
  it('any one byte changed, or the stream cut anywhere: refused as corrupt with nothing left, or restored identical', async () => {
    await fc.assert(
      fc.asyncProperty(tree, fc.nat(), fc.integer({ min: 1, max: 255 }), fc.boolean(), async (children, at, xor, cut) => {
        const { dir, outside } = await scratch();
        const src = join(dir, 'src');
        await mkdir(src);
        await materialise(src, children);
        const archive = await packed(src);
        await rm(src, { recursive: true });
        const damaged = Buffer.from(archive);
        const offset = at % archive.length;
        if (!cut) damaged[offset] ^= xor;
        const bytes = cut ? damaged.subarray(0, offset) : damaged;
        const result = await restoreArchive(Readable.from([bytes]), join(dir, 'ws')).then(
          () => undefined,
          (e: unknown) => e,
        );
        if (result !== undefined && !(result instanceof ArchiveRefused)) throw result;
        const refused = result instanceof ArchiveRefused;
        // Refused as corrupt with nothing left beside the tree; or, where only bytes nobody checks changed
        // (gzip's header mtime, OS, flags like FTEXT), never a cut, the whole tree restored.
        expect({ reason: refused ? result.reason : 'restored', cut: refused ? 'either' : cut }).toEqual(refused ? { reason: 'corrupt', cut: 'either' } : { reason: 'restored', cut: false });
        expect(refused ? (await readdir(dir)).sort() : await onDisk(join(dir, 'ws'))).toEqual(refused ? ['outside.txt'] : expectedOf(children));
        expect(await readFile(outside, 'utf8')).toBe('original');
        await rm(dir, { recursive: true });
      }),
      limits(40),
    );
  }, TIMEOUT_MS);
});

describe('paths asked of an archive (properties)', () => {
  it('a path is refused, or is normal (relative, no `.`, `..`, empty part or NUL) and checks to itself', () => {
    const part = fc.oneof(fc.constantFrom('', '.', '..', 'a', 'b.txt', '\0', ' '), fc.string({ unit: 'binary', maxLength: 4 }));
    fc.assert(
      fc.property(fc.array(part, { maxLength: 6 }).map((parts) => parts.join('/')), (path) => {
        let normal = '';
        let error: unknown;
        try {
          normal = checkArchivePath(path);
        } catch (err) {
          error = err;
        }
        const hostile = path.includes('\0') || path.startsWith('/') || path.split('/').includes('..') || normalArchivePath(path) === '';
        // Refused exactly as a BadArchivePath, and only a path with something hostile in it.
        expect({ refused: error !== undefined, bad: error === undefined || error instanceof BadArchivePath, hostileIfRefused: error === undefined || hostile }).toEqual({
          refused: error !== undefined,
          bad: true,
          hostileIfRefused: true,
        });
        fc.pre(error === undefined);
        expect(normal.startsWith('/') || normal.includes('\0')).toBe(false);
        expect(normal.split('/').some((p) => p === '' || p === '.' || p === '..')).toBe(false);
        expect(checkArchivePath(normal)).toBe(normal);
        expect(normalArchivePath(normal)).toBe(normal);
        expect(posix.normalize(normal)).toBe(normal);
      }),
    );
  });
});
