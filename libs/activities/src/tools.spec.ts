import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BadArguments, embed, embedTool, searchTool } from './tools';
import { Workspace } from './workspace';

describe('tools on a real workspace directory', () => {
  let root: string;
  let workspace: Workspace;
  const beats: number[] = [];
  const ctx = () => ({ workspace, step: 3, heartbeat: ({ done }: { done: number }) => void beats.push(done) });

  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'ws-'));
    workspace = new Workspace(root, 'acme', 'run-1');
    await workspace.write('goal.md', '# Goal\n\nfind the memory leak in the parser\n');
    await workspace.write('src/parser.txt', 'the parser allocates a buffer per token\nunrelated line\n');
  });
  afterEach(() => rm(root, { recursive: true, force: true }));

  it('search finds the lines that share terms with the query and files a note', async () => {
    const out = await searchTool.run({ query: 'parser leak' }, ctx());
    expect(out).toMatch(/^2 matching lines in 2 files/);
    expect(await workspace.read('notes/step-3-search.md')).toMatch(/goal.md: find the memory leak in the parser/);
    expect(beats.length).toBeGreaterThan(0);
  });

  it('embed writes an L2-normalised hashed feature vector', async () => {
    const out = await embedTool.run({ text: 'the parser allocates a buffer' }, ctx());
    expect(out).toMatch(/embedded 4 terms into 64 dims/);
    const { vector } = JSON.parse(await workspace.read('vectors/step-3.json')) as { vector: number[] };
    expect(Math.hypot(...vector)).toBeCloseTo(1, 5);
    expect(embed('same words')).toEqual(embed('same words'));
  });

  it('bad arguments are refused, and no path leaves the workspace', async () => {
    await expect(searchTool.run({ query: '' }, ctx())).rejects.toBeInstanceOf(BadArguments);
    await expect(workspace.write('../escape.txt', 'x')).rejects.toThrow(/escapes/);
    expect(() => new Workspace(root, '..', '..')).toThrow(/escapes/);
  });
});
