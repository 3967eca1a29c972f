import { mkdir, mkdtemp, readFile, readlink, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BadArguments } from './tools/common';
import { Workspace } from './workspace';

/** Writes on a real directory where a command the run ran has left links, in and out of the workspace. */
describe('Workspace.write and the links a run may leave', () => {
  let root: string;
  let ws: Workspace;
  let outside: string;

  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'agentrun-workspace-'));
    ws = new Workspace(join(root, 'workspaces'), 'acme', 'run-1');
    outside = join(root, 'outside');
    await mkdir(outside, { recursive: true });
    await writeFile(join(outside, 'secret.txt'), 'untouched');
    await mkdir(ws.dir, { recursive: true });
  });
  afterEach(() => rm(root, { recursive: true, force: true }));

  it('writes a file and the directories it needs', async () => {
    await ws.write('src/pkg/a.py', 'x = 1\n');
    expect(await ws.read('src/pkg/a.py')).toBe('x = 1\n');
  });

  it('refuses a path through a directory link that leads out, and writes nothing there', async () => {
    await symlink(outside, join(ws.dir, 'out'));
    await expect(ws.write('out/secret.txt', 'overwritten')).rejects.toThrow(new BadArguments("'out/secret.txt' goes through a link out of the workspace (out)"));
    await expect(ws.write('out/new/deep.txt', 'x')).rejects.toBeInstanceOf(BadArguments);
    expect(await readFile(join(outside, 'secret.txt'), 'utf8')).toBe('untouched');
  });

  it('refuses to write through a file link that leads out, or nowhere', async () => {
    await symlink(join(outside, 'secret.txt'), join(ws.dir, 'notes.md'));
    await expect(ws.write('notes.md', 'overwritten')).rejects.toThrow(/goes through a link out of the workspace \(notes\.md\)/);
    await symlink('/nonexistent/file', join(ws.dir, 'dangling'));
    await expect(ws.write('dangling', 'x')).rejects.toThrow(/a link that leads nowhere \(dangling\)/);
    expect(await readFile(join(outside, 'secret.txt'), 'utf8')).toBe('untouched');
    expect(await readlink(join(ws.dir, 'dangling'))).toBe('/nonexistent/file');
  });

  it('follows a link that stays inside the workspace', async () => {
    await mkdir(join(ws.dir, 'real'), { recursive: true });
    await writeFile(join(ws.dir, 'real', 'target.txt'), 'before');
    await symlink('real', join(ws.dir, 'alias'));
    await symlink('real/target.txt', join(ws.dir, 'shortcut.txt'));
    await ws.write('alias/file.txt', 'via the directory link');
    await ws.write('shortcut.txt', 'via the file link');
    expect(await readFile(join(ws.dir, 'real', 'file.txt'), 'utf8')).toBe('via the directory link');
    expect(await readFile(join(ws.dir, 'real', 'target.txt'), 'utf8')).toBe('via the file link');
  });

  it('refuses a path whose parent is a file, and a path that leaves by its text', async () => {
    await ws.write('plain.txt', 'x');
    await expect(ws.write('plain.txt/child', 'y')).rejects.toThrow(new BadArguments("'plain.txt' is not a directory"));
    await expect(ws.write('../run-2/x', 'y')).rejects.toThrow(/escapes the workspace/);
  });
});
