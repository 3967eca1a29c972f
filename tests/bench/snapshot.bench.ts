/**
 * Workspace archives in numbers, on a reference workspace built here (300 MB of random bytes and
 * 22 MB of text in 400 files, in a few directories):
 *
 *   (a) packDirectory to a file, beside GNU `tar cf` (no compression: the floor) and `tar czf`
 *       (gzip's default level), all over the same files;
 *   (b) restoreArchive of our archive, beside GNU `tar xzf` of the same archive;
 *   (c) the resident memory packing adds, sampled every 10 ms, at 1/3, 2/3 and all of the workspace,
 *       to show it does not grow with the workspace.
 *
 * Page caches cannot be dropped here, so every measurement is taken twice and the second (warm) run
 * is reported: the files are in memory, and what is compared is the work each tool does. Before each
 * run (untimed) `sync` writes back what earlier steps left dirty, so no tool pays for another's writes.
 *
 *   npm run bench:snapshot
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { link, mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pipeline } from 'node:stream/promises';
import { packDirectory, restoreArchive } from '@agentrun/archive';

const MB = 1_000_000;
const BINARY = { dirs: ['assets', 'data'], filesPerDir: 50, bytes: 3 * MB }; // 300 MB
const TEXT = { dirs: ['src', 'docs', 'notes'], filesPerDir: 100, totalBytes: 22 * MB }; // 300 files

const WORDS = 'agent run step tool model workspace snapshot archive restore kafka temporal postgres event state fork lane lease budget history payload'.split(' ');

/** Deterministic prose-like text, so gzip has something to compress. */
function text(bytes: number, seed: number): Buffer {
  const out = Buffer.alloc(bytes);
  let x = seed * 2654435761 + 1;
  let pos = 0;
  while (pos < bytes) {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    const word = WORDS[x % WORDS.length];
    pos += out.write(x % 13 === 0 ? `${word}.\n` : `${word} `, pos);
  }
  return out;
}

async function buildReferenceWorkspace(root: string): Promise<string[]> {
  const files: string[] = [];
  for (const dir of BINARY.dirs) {
    await mkdir(join(root, dir, 'blobs'), { recursive: true });
    for (let i = 0; i < BINARY.filesPerDir; i++) {
      const path = `${dir}/blobs/part-${String(i).padStart(3, '0')}.bin`;
      await writeFile(join(root, path), randomBytes(BINARY.bytes));
      files.push(path);
    }
  }
  const textFiles = TEXT.dirs.length * TEXT.filesPerDir;
  for (const [d, dir] of TEXT.dirs.entries()) {
    await mkdir(join(root, dir, 'pkg'), { recursive: true });
    for (let i = 0; i < TEXT.filesPerDir; i++) {
      const path = `${dir}/${i % 2 ? 'pkg/' : ''}file-${String(i).padStart(3, '0')}.txt`;
      await writeFile(join(root, path), text(Math.floor(TEXT.totalBytes / textFiles), d * 1000 + i));
      files.push(path);
    }
  }
  return files;
}

/** A smaller workspace of the same shape: the first `fraction` of each directory's files, as hard links (no extra disk). */
async function linkSubset(from: string, to: string, files: string[], fraction: number): Promise<void> {
  const byDir = new Map<string, string[]>();
  for (const f of files) byDir.set(f.split('/')[0], [...(byDir.get(f.split('/')[0]) ?? []), f]);
  for (const list of byDir.values()) {
    for (const f of list.slice(0, Math.round(list.length * fraction))) {
      await mkdir(join(to, f, '..'), { recursive: true });
      await link(join(from, f), join(to, f));
    }
  }
}

async function treeBytes(root: string): Promise<number> {
  let total = 0;
  for (const entry of await readdir(root, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) total += (await stat(join(entry.parentPath, entry.name))).size;
  }
  return total;
}

/** Untimed, before every measured run: dirty pages of earlier steps would otherwise be written back during it. */
function settle(): void {
  execFileSync('sync');
}

/**
 * Runs `work` twice and returns the second run's time and the most resident memory it added;
 * `before` (untimed) clears what the previous run left.
 */
async function warm(work: () => Promise<void>, before?: () => Promise<void>): Promise<{ ms: number; peakRssGrowth: number }> {
  let result = { ms: 0, peakRssGrowth: 0 };
  for (let run = 0; run < 2; run++) {
    await before?.();
    settle();
    (globalThis as { gc?: () => void }).gc?.();
    const base = process.memoryUsage.rss();
    let peak = base;
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage.rss());
    }, 10);
    const t0 = performance.now();
    try {
      await work();
    } finally {
      clearInterval(sampler);
    }
    const ms = performance.now() - t0;
    peak = Math.max(peak, process.memoryUsage.rss());
    result = { ms, peakRssGrowth: peak - base };
  }
  return result;
}

async function warmCommand(cmd: string, args: string[], before?: () => Promise<void>): Promise<number> {
  let ms = 0;
  for (let run = 0; run < 2; run++) {
    await before?.();
    settle();
    const t0 = performance.now();
    execFileSync(cmd, args, { stdio: 'ignore' });
    ms = performance.now() - t0;
  }
  return ms;
}

const rate = (bytes: number, ms: number) => `${(bytes / MB / (ms / 1000)).toFixed(0)} MB/s`;
const secs = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
const row = (cells: string[]) => console.log(`| ${cells.join(' | ')} |`);

async function main(): Promise<void> {
  const base = await mkdtemp(join(tmpdir(), 'bench-snapshot-'));
  try {
    const ws = join(base, 'ws');
    const files = await buildReferenceWorkspace(ws);
    const size = await treeBytes(ws);
    const ours = join(base, 'ours.tar.gz');

    // (a) packing
    const pack = await warm(() => pipeline(packDirectory(ws), createWriteStream(ours)));
    const tarCf = await warmCommand('tar', ['cf', join(base, 'gnu.tar'), '-C', ws, '.']);
    const tarCzf = await warmCommand('tar', ['czf', join(base, 'gnu.tar.gz'), '-C', ws, '.']);
    const sizes = {
      ours: (await stat(ours)).size,
      tar: (await stat(join(base, 'gnu.tar'))).size,
      tgz: (await stat(join(base, 'gnu.tar.gz'))).size,
    };
    await rm(join(base, 'gnu.tar'));
    await rm(join(base, 'gnu.tar.gz'));

    // (b) restoring our archive
    const restored = join(base, 'restored');
    const clear = () => rm(restored, { recursive: true, force: true });
    const restore = await warm(async () => {
      await restoreArchive(createReadStream(ours, { highWaterMark: 1024 * 1024 }), restored);
    }, clear);
    const tarXzf = await warmCommand('tar', ['xzf', ours, '-C', restored], async () => {
      await clear();
      await mkdir(restored);
    });
    await clear();

    // (c) memory as the workspace grows
    const scaling: { bytes: number; ms: number; peak: number }[] = [];
    for (const fraction of [1 / 3, 2 / 3]) {
      const subset = join(base, `ws-${fraction.toFixed(2)}`);
      await linkSubset(ws, subset, files, fraction);
      const bytes = await treeBytes(subset);
      const r = await warm(() => pipeline(packDirectory(subset), createWriteStream(join(base, 'subset.tar.gz'))));
      scaling.push({ bytes, ms: r.ms, peak: r.peakRssGrowth });
      await rm(subset, { recursive: true, force: true });
    }
    scaling.push({ bytes: size, ms: pack.ms, peak: pack.peakRssGrowth });

    console.log(`\nReference workspace: ${files.length} files, ${(size / MB).toFixed(1)} MB (${BINARY.dirs.length * BINARY.filesPerDir} random x ${BINARY.bytes / MB} MB, ${TEXT.dirs.length * TEXT.filesPerDir} text files ${(TEXT.totalBytes / MB).toFixed(0)} MB)`);
    console.log('Every figure is the second (warm) of two runs, each after a sync: page caches cannot be dropped here. MB = 10^6 bytes; rates are workspace bytes per second.\n');
    row(['what', 'time', 'rate', 'output']);
    row(['---', '---', '---', '---']);
    row(['packDirectory -> file (tar + gzip stored blocks)', secs(pack.ms), rate(size, pack.ms), `${(sizes.ours / MB).toFixed(1)} MB`]);
    row(['GNU tar cf (no compression)', secs(tarCf), rate(size, tarCf), `${(sizes.tar / MB).toFixed(1)} MB`]);
    row(['GNU tar czf (gzip default level)', secs(tarCzf), rate(size, tarCzf), `${(sizes.tgz / MB).toFixed(1)} MB`]);
    row(['restoreArchive (our archive)', secs(restore.ms), rate(size, restore.ms), '']);
    row(['GNU tar xzf (our archive)', secs(tarXzf), rate(size, tarXzf), '']);
    console.log(`\nours / tar cf (throughput): ${(tarCf / pack.ms).toFixed(2)}x   ours / tar czf: ${(tarCzf / pack.ms).toFixed(2)}x`);
    console.log(`peak RSS growth while packing (sampled every 10 ms): ${mib(pack.peakRssGrowth)}; while restoring: ${mib(restore.peakRssGrowth)}\n`);
    row(['workspace', 'pack time', 'rate', 'peak RSS growth']);
    row(['---', '---', '---', '---']);
    for (const s of scaling) row([`${(s.bytes / MB).toFixed(1)} MB`, secs(s.ms), rate(s.bytes, s.ms), mib(s.peak)]);
  } finally {
    await rm(base, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
