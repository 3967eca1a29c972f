import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ArchiveFileNotFound, ArchiveFileTooLarge, BadArchivePath, checkArchivePath, listArchive, openArchiveFile } from './archive-view';
import { ArchiveRefused } from './refusal';

let dir: string;
let archive: string;
const bytes = randomBytes(300_000);

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'archive-view-'));
  const src = join(dir, 'src');
  await mkdir(join(src, 'a', 'b'), { recursive: true });
  await mkdir(join(src, 'a-c'));
  await writeFile(join(src, 'a', 'b', 'deep.txt'), 'deep\n');
  await writeFile(join(src, 'a-c', 'x.bin'), bytes);
  await writeFile(join(src, `${'long-name-'.repeat(14)}.md`), 'a name longer than ustar holds\n');
  for (let i = 0; i < 30; i++) await writeFile(join(src, `f${String(i).padStart(2, '0')}.txt`), `file ${i}\n`);
  await symlink('a/b/deep.txt', join(src, 'link'));
  archive = join(dir, 'gnu.tar.gz');
  // GNU tar's own archive (pax, with `./` in front of every name), as a foreign writer's.
  execFileSync('tar', ['--format=posix', '-czf', archive, '-C', src, '.']);
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const gnuList = () =>
  execFileSync('tar', ['tzf', archive], { encoding: 'utf8' })
    .split('\n')
    .map((p) => p.replace(/^\.\//, '').replace(/\/$/, ''))
    .filter((p) => p !== '' && p !== '.');

describe('reading an archive without extracting it', () => {
  it('lists what GNU tar lists, in its order, page by page', async () => {
    const paths: string[] = [];
    let after: string | undefined;
    let pages = 0;
    for (;;) {
      const page = await listArchive(createReadStream(archive), { limit: 7, ...(after !== undefined ? { after: Number(after) } : {}) });
      paths.push(...page.entries.map((e) => e.path));
      pages++;
      if (!page.next_after) break;
      expect(page.entries).toHaveLength(7);
      after = page.next_after;
    }
    expect(paths).toEqual(gnuList());
    expect(pages).toBe(Math.ceil(gnuList().length / 7));
  });

  it('pages through an archive that names a path twice, to its end', async () => {
    const src = join(dir, 'twice');
    await mkdir(src);
    await writeFile(join(src, 'a.txt'), 'first\n');
    await writeFile(join(src, 'b.txt'), 'b\n');
    const tar = join(dir, 'twice.tar');
    execFileSync('tar', ['-cf', tar, '-C', src, 'a.txt', 'b.txt']);
    await writeFile(join(src, 'a.txt'), 'second\n');
    execFileSync('tar', ['-rf', tar, '-C', src, 'a.txt']);
    execFileSync('gzip', ['-f', tar]);
    const paths: string[] = [];
    for (let after: string | undefined, pages = 0; pages < 10; pages++) {
      const page = await listArchive(createReadStream(`${tar}.gz`), { limit: 1, ...(after !== undefined ? { after: Number(after) } : {}) });
      paths.push(...page.entries.map((e) => e.path));
      after = page.next_after;
      if (after === undefined) break;
    }
    expect(paths).toEqual(['a.txt', 'b.txt', 'a.txt']);
  });

  it('gives each entry its type, size, mode, mtime and link', async () => {
    const { entries } = await listArchive(createReadStream(archive), { limit: 1_000 });
    const byPath = Object.fromEntries(entries.map((e) => [e.path, e]));
    expect(byPath['a-c/x.bin']).toMatchObject({ type: 'file', size: bytes.length, mode: 0o644 & byPath['a-c/x.bin'].mode });
    expect(byPath['a']).toMatchObject({ type: 'dir', size: 0 });
    expect(byPath['link']).toMatchObject({ type: 'symlink', link: 'a/b/deep.txt' });
    expect(Date.parse(byPath['f00.txt'].mtime)).toBeGreaterThan(Date.now() - 3_600_000);
  });

  it("reads one file's bytes as GNU tar extracts them, a long name's too", async () => {
    const out = join(dir, 'out');
    await mkdir(out);
    execFileSync('tar', ['xzf', archive, '-C', out]);
    for (const path of ['a-c/x.bin', 'a/b/deep.txt', `${'long-name-'.repeat(14)}.md`, 'f29.txt']) {
      const file = await openArchiveFile(createReadStream(archive), path, 1_000_000);
      const chunks: Buffer[] = [];
      for await (const chunk of file.data) chunks.push(chunk);
      expect(Buffer.concat(chunks).equals(await readFile(join(out, path)))).toBe(true);
      expect(file.entry.size).toBe((await readFile(join(out, path))).length);
    }
  });

  it('refuses a file past the cap with its size, a directory, a link, a missing path, and hostile paths', async () => {
    await expect(openArchiveFile(createReadStream(archive), 'a-c/x.bin', 1_000)).rejects.toEqual(new ArchiveFileTooLarge('a-c/x.bin', bytes.length, 1_000));
    await expect(openArchiveFile(createReadStream(archive), 'a/b', 1_000)).rejects.toThrow(new ArchiveFileNotFound("'a/b' is a directory, not a file"));
    await expect(openArchiveFile(createReadStream(archive), 'link', 1_000)).rejects.toThrow(ArchiveFileNotFound);
    await expect(openArchiveFile(createReadStream(archive), 'nope.txt', 1_000)).rejects.toThrow("the archive has no 'nope.txt'");
    for (const bad of ['../etc/passwd', 'a/../../x', '/etc/passwd', 'a\0b', '', './']) expect(() => checkArchivePath(bad)).toThrow(BadArchivePath);
    expect(checkArchivePath('./a/b/deep.txt')).toBe('a/b/deep.txt');
  });

  it('refuses a truncated archive as corrupt', async () => {
    const cut = join(dir, 'cut.tar.gz');
    const whole = await readFile(archive);
    await writeFile(cut, whole.subarray(0, Math.floor(whole.length / 2)));
    // Looking for a file the archive does not have reads it all: the cut is found, not a missing file.
    const reading = openArchiveFile(createReadStream(cut), 'nope.txt', 1_000_000);
    await expect(reading).rejects.toBeInstanceOf(ArchiveRefused);
    await expect(listArchive(createReadStream(cut), { limit: 1_000 })).rejects.toMatchObject({ reason: 'corrupt' });
  });
});
