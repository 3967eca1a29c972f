import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, createReadStream } from 'node:fs';
import { chmod, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { diffArchives } from './archive-diff';
import { packDirectory } from './pack';

let dir: string;
const archives: Record<'a' | 'b', string> = { a: '', b: '' };
const lines = (n: number, changed: Set<number> = new Set()) => Array.from({ length: n }, (_, i) => (changed.has(i) ? `line ${i} changed` : `line ${i}`)).join('\n') + '\n';
const binary = randomBytes(4096);

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'archive-diff-'));
  for (const side of ['a', 'b'] as const) {
    const root = join(dir, side);
    await mkdir(join(root, 'notes'), { recursive: true });
    await writeFile(join(root, 'same.txt'), 'the same on both sides\n');
    await writeFile(join(root, 'notes', 'long.md'), side === 'a' ? lines(40) : lines(40, new Set([5, 30])));
    await writeFile(join(root, 'data.bin'), side === 'a' ? binary : Buffer.concat([binary, Buffer.from([0, 1])]));
    await writeFile(join(root, 'big.txt'), side === 'a' ? lines(20_000) : lines(20_000, new Set([3])));
    await writeFile(join(root, 'script.sh'), 'echo hi\n');
    await chmod(join(root, 'script.sh'), side === 'a' ? 0o644 : 0o755);
    if (side === 'a') await writeFile(join(root, 'gone.txt'), 'removed in b\n');
    else await writeFile(join(root, 'notes', 'new.md'), 'added in b\n');
    await symlink(side === 'a' ? 'same.txt' : 'notes/long.md', join(root, 'link'));
    archives[side] = join(dir, `${side}.tar.gz`);
    await pipeline(packDirectory(root), createWriteStream(archives[side]));
  }
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const open = async (side: 'a' | 'b') => createReadStream(archives[side]);

describe('diffing two archives as they stream', () => {
  it('lists what was added, removed and changed, and why', async () => {
    const diff = await diffArchives(open);
    expect(diff.added.map((e) => e.path)).toEqual(['notes/new.md']);
    expect(diff.removed.map((e) => e.path)).toEqual(['gone.txt']);
    expect(Object.fromEntries(diff.changed.map((c) => [c.path, c.what]))).toEqual({
      'big.txt': ['content'],
      'data.bin': ['content'],
      link: ['link'],
      'notes/long.md': ['content'],
      'script.sh': ['mode'],
    });
    // same.txt and the notes directory.
    expect(diff.unchanged).toBe(2);
  });

  it("gives a changed text file the unified diff GNU diff gives, a binary or large one none, with why", async () => {
    const diff = await diffArchives(open, { textMaxBytes: 64 * 1024, diffBudgetBytes: 1024 * 1024, diffMaxChars: 64 * 1024 });
    const long = diff.changed.find((c) => c.path === 'notes/long.md')!;
    await writeFile(join(dir, 'long-a'), lines(40));
    await writeFile(join(dir, 'long-b'), lines(40, new Set([5, 30])));
    let gnu = '';
    try {
      execFileSync('diff', ['-u', join(dir, 'long-a'), join(dir, 'long-b')], { encoding: 'utf8' });
    } catch (err) {
      gnu = (err as { stdout: string }).stdout;
    }
    const hunks = (text: string) => text.slice(text.indexOf('@@'));
    expect(hunks(long.diff!)).toBe(hunks(gnu));
    expect(long.diff!.startsWith('--- a/notes/long.md\n+++ b/notes/long.md\n')).toBe(true);
    expect(diff.changed.find((c) => c.path === 'data.bin')).toMatchObject({ diff_omitted: 'binary' });
    expect(diff.changed.find((c) => c.path === 'big.txt')).toMatchObject({ diff_omitted: 'too_large' });
    expect(diff.changed.find((c) => c.path === 'script.sh')?.diff).toBeUndefined();
  });

  it('stops making diffs when the budget is spent, and cuts a long one', async () => {
    const tight = await diffArchives(open, { textMaxBytes: 256 * 1024, diffBudgetBytes: 100, diffMaxChars: 64 * 1024 });
    expect(tight.changed.find((c) => c.path === 'notes/long.md')).toMatchObject({ diff_omitted: 'diff_budget' });
    const cut = await diffArchives(open, { textMaxBytes: 256 * 1024, diffBudgetBytes: 1024 * 1024, diffMaxChars: 40 });
    expect(cut.changed.find((c) => c.path === 'notes/long.md')).toMatchObject({ diff_truncated: true });
    expect(cut.changed.find((c) => c.path === 'notes/long.md')!.diff).toHaveLength(40);
  });
});
