/**
 * Looking into a snapshot without extracting it: listing a workspace archive's entries, and reading
 * one file from its end, as the gateway does (`listArchive`, `openArchiveFile`: the archive read as it
 * streams), beside GNU tar on the same archive in the same run (`tar tzf`, `tar xzf -O <path>`). The
 * archive is what the snapshotter packs (`packDirectory`) from a workspace of FILES files of SIZE_MB
 * in all, of incompressible bytes, so the stream is as long as the workspace. Each side runs as a
 * process of its own, the sides alternating for ROUNDS rounds; the time is its wall time, the memory its
 * peak resident set (VmHWM, read from /proc while it runs), beside the floor of a node process that
 * loads the same modules and reads nothing. Prints medians and the ratios to tar's.
 *
 *   npm run bench:archive-view [-- ROUNDS [SIZE_MB [FILES]]]     (default 3 rounds, 300 MB, 400 files)
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { listArchive, openArchiveFile, packDirectory } from '@agentrun/archive';

type Side = { name: string; argv: string[] };

/** The child side: lists the archive, or reads one file of it, and prints what it saw. */
async function child(mode: string, archive: string, path?: string): Promise<void> {
  if (mode === 'idle') {
    // The floor: the same process with the same modules loaded, reading nothing.
    process.stdout.write('idle\n');
  } else if (mode === 'list') {
    const page = await listArchive(createReadStream(archive), { limit: 1_000_000 });
    process.stdout.write(`${page.entries.length} entries\n`);
  } else {
    const file = await openArchiveFile(createReadStream(archive), path!, Number.MAX_SAFE_INTEGER);
    let bytes = 0;
    for await (const chunk of file.data) bytes += chunk.length;
    process.stdout.write(`${bytes} bytes\n`);
  }
}

/** Runs one side to its end: wall time, and its peak resident set from /proc (kB), polled every 5 ms. */
function measure(side: Side): Promise<{ seconds: number; peakKb: number; out: string }> {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const proc = spawn(side.argv[0], side.argv.slice(1), { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    let peakKb = 0;
    proc.stdout.on('data', (d: Buffer) => (out += d.toString('utf8').slice(0, 200)));
    const poll = setInterval(() => {
      readFile(`/proc/${proc.pid}/status`, 'utf8')
        .then((status) => {
          const hwm = /VmHWM:\s+(\d+)/.exec(status);
          if (hwm) peakKb = Math.max(peakKb, Number(hwm[1]));
        })
        .catch(() => undefined);
    }, 5);
    proc.on('error', reject);
    proc.on('close', (code) => {
      clearInterval(poll);
      if (code !== 0) return reject(new Error(`${side.name} exited with ${code}`));
      resolve({ seconds: Number(process.hrtime.bigint() - started) / 1e9, peakKb, out: out.trim() });
    });
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main(): Promise<void> {
  const rounds = Number(process.argv[2] ?? 3);
  const sizeMb = Number(process.argv[3] ?? 300);
  const files = Number(process.argv[4] ?? 400);
  const dir = await mkdtemp(join(tmpdir(), 'archive-view-bench-'));
  try {
    const workspace = join(dir, 'workspace');
    // Files of uneven sizes in a few directories, as a workspace has.
    const weights = Array.from({ length: files }, (_, i) => 1 + ((i * 7919) % 13));
    const total = weights.reduce((a, b) => a + b, 0);
    for (let i = 0; i < files; i++) {
      const sub = join(workspace, `dir-${i % 8}`);
      await mkdir(sub, { recursive: true });
      await writeFile(join(sub, `file-${String(i).padStart(4, '0')}.bin`), randomBytes(Math.floor((weights[i] / total) * sizeMb * 1024 * 1024)));
    }
    const archive = join(dir, 'workspace.tar.gz');
    await pipeline(packDirectory(workspace), createWriteStream(archive));
    const listing = await listArchive(createReadStream(archive), { limit: 1_000_000 });
    const last = listing.entries.filter((e) => e.type === 'file').at(-1)!;
    console.log(`archive: ${((await stat(archive)).size / 1024 / 1024).toFixed(1)} MB, ${listing.entries.length} entries; the file read is the archive's last, '${last.path}' (${(last.size / 1024).toFixed(0)} KiB)`);

    const self = [process.execPath, __filename, '--child'];
    const sides: Side[] = [
      { name: 'GNU tar tzf', argv: ['tar', 'tzf', archive] },
      { name: 'listArchive', argv: [...self, 'list', archive] },
      { name: 'GNU tar xzf -O <last file>', argv: ['tar', 'xzf', archive, '-O', last.path] },
      { name: 'openArchiveFile <last file>', argv: [...self, 'read', archive, last.path] },
    ];
    const floor: Side = { name: 'node, same modules, nothing read', argv: [...self, 'idle', archive] };
    const results = new Map<string, { seconds: number[]; peakKb: number[] }>(sides.map((s) => [s.name, { seconds: [], peakKb: [] }]));
    const floorKb: number[] = [];
    for (let round = 0; round < rounds; round++) {
      floorKb.push((await measure(floor)).peakKb);
      for (const side of sides) {
        const r = await measure(side);
        results.get(side.name)!.seconds.push(r.seconds);
        results.get(side.name)!.peakKb.push(r.peakKb);
      }
    }
    console.log(`\n${rounds} rounds, sides alternating; medians. The floor of a node side (${floor.name}): ${(median(floorKb) / 1024).toFixed(1)} MB peak RSS`);
    console.log('| side | wall s | peak RSS MB | time / tar | memory / tar |');
    console.log('| --- | --- | --- | --- | --- |');
    for (const [i, side] of sides.entries()) {
      const r = results.get(side.name)!;
      const base = results.get(sides[i - (i % 2)].name)!;
      const t = median(r.seconds);
      const m = median(r.peakKb);
      console.log(`| ${side.name} | ${t.toFixed(2)} | ${(m / 1024).toFixed(1)} | ${(t / median(base.seconds)).toFixed(2)}x | ${(m / median(base.peakKb)).toFixed(2)}x |`);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === '--child') {
  child(process.argv[3], process.argv[4], process.argv[5]).catch((err) => {
    console.error(err);
    process.exit(1);
  });
} else {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
