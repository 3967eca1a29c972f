import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { deflateSync } from 'node:zlib';
import {
  BadArguments,
  bm25,
  CPU_TOOLS,
  embed,
  embedTool,
  fetchTool,
  GPU_TOOLS,
  imageHeader,
  parseCsv,
  parseTool,
  rerankTool,
  searchTool,
  splitPassages,
  TOOL_LANES,
  visionTool,
} from './tools';
import { Workspace } from './workspace';

// ---------------------------------------------------------------------------------------------
// Tiny images, built byte by byte.
// ---------------------------------------------------------------------------------------------

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(bytes: Buffer): number {
  let c = 0xffffffff;
  for (const b of bytes) c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function pngChunk(type: string, data: Buffer): Buffer {
  const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([length, body, crc]);
}

/** A complete, decodable 8-bit RGB PNG: signature, IHDR, one zlib IDAT (filter 0 rows of red pixels), IEND. */
function png(width: number, height: number): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // truecolour; compression, filter and interlace stay 0
  const row = 1 + width * 3;
  const raw = Buffer.alloc(height * row);
  for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) raw[y * row + 1 + x * 3] = 255;
  const signature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  return Buffer.concat([signature, pngChunk('IHDR', ihdr), pngChunk('IDAT', deflateSync(raw)), pngChunk('IEND', Buffer.alloc(0))]);
}

/**
 * A complete, decodable GIF89a: a two-colour global table and alternating black and white pixels. The LZW
 * stream uses 3-bit codes and sends a clear code before every second pixel, so the code table never grows.
 */
function gif(width: number, height: number): Buffer {
  const codes: number[] = [];
  for (let i = 0; i < width * height; i++) {
    if (i % 2 === 0) codes.push(4); // clear
    codes.push(i % 2);
  }
  codes.push(5); // end of information
  const packed: number[] = [];
  let acc = 0;
  let bits = 0;
  for (const code of codes) {
    acc |= code << bits;
    bits += 3;
    while (bits >= 8) {
      packed.push(acc & 0xff);
      acc >>= 8;
      bits -= 8;
    }
  }
  if (bits) packed.push(acc & 0xff);
  const blocks: number[] = [];
  for (let i = 0; i < packed.length; i += 255) blocks.push(Math.min(255, packed.length - i), ...packed.slice(i, i + 255));
  const le = (n: number) => [n & 0xff, n >> 8];
  return Buffer.from([
    ...Buffer.from('GIF89a', 'ascii'),
    ...le(width),
    ...le(height),
    0x80, // global colour table of 2 entries
    0,
    0,
    ...[0, 0, 0, 255, 255, 255],
    0x2c, // image descriptor
    ...le(0),
    ...le(0),
    ...le(width),
    ...le(height),
    0,
    2, // LZW minimum code size
    ...blocks,
    0,
    0x3b, // trailer
  ]);
}

const segment = (marker: number, payload: number[]) => [0xff, marker, (payload.length + 2) >> 8, (payload.length + 2) & 0xff, ...payload];
const be16 = (n: number) => [n >> 8, n & 0xff];

/**
 * A complete, decodable baseline greyscale JPEG, uniformly mid-grey: JFIF APP0, a DQT of ones, SOF0, one-code
 * DC and AC Huffman tables (category 0 and EOB, both the 1-bit code `0`), and a scan of two 0 bits per block.
 */
function jpeg(width: number, height: number): Buffer {
  const blocks = Math.ceil(width / 8) * Math.ceil(height / 8);
  const scan = new Array<number>(Math.ceil((blocks * 2) / 8)).fill(0);
  const padding = scan.length * 8 - blocks * 2; // the last byte is padded with 1 bits
  if (padding) scan[scan.length - 1] = (1 << padding) - 1;
  const oneCode = [1, ...new Array<number>(15).fill(0), 0x00];
  return Buffer.from([
    0xff, 0xd8,
    ...segment(0xe0, [...Buffer.from('JFIF\0', 'ascii'), 1, 1, 0, ...be16(1), ...be16(1), 0, 0]),
    ...segment(0xdb, [0, ...new Array<number>(64).fill(1)]),
    ...segment(0xc0, [8, ...be16(height), ...be16(width), 1, 1, 0x11, 0]),
    ...segment(0xc4, [0x00, ...oneCode]),
    ...segment(0xc4, [0x10, ...oneCode]),
    ...segment(0xda, [1, 1, 0x00, 0, 63, 0]),
    ...scan,
    0xff, 0xd9,
  ]);
}

/** Only the markers up to a progressive (SOF2) frame header, three components: enough to read, not to decode. */
function progressiveJpegHeader(width: number, height: number): Buffer {
  const components = [1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1];
  return Buffer.from([0xff, 0xd8, ...segment(0xfe, [...Buffer.from('comment', 'ascii')]), 0xff, ...segment(0xc2, [8, ...be16(height), ...be16(width), 3, ...components]), 0xff, 0xd9]);
}

// ---------------------------------------------------------------------------------------------

describe('tools on a real workspace directory', () => {
  let root: string;
  let workspace: Workspace;
  const beats: number[] = [];
  const ctx = () => ({ workspace, step: 3, heartbeat: ({ done }: { done: number }) => void beats.push(done) });
  const writeBytes = async (file: string, bytes: Buffer) => {
    await mkdir(dirname(join(workspace.dir, file)), { recursive: true });
    await writeFile(join(workspace.dir, file), bytes);
  };
  const readJson = async <T>(file: string) => JSON.parse(await workspace.read(file)) as T;

  beforeEach(async () => {
    beats.length = 0;
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

  it('serves parse and fetch on the CPU lane, vision and rerank on the GPU lane', () => {
    expect(CPU_TOOLS.map((t) => t.name)).toEqual(['search', 'parse', 'fetch']);
    expect(GPU_TOOLS.map((t) => t.name)).toEqual(['embed', 'vision', 'rerank']);
    expect(TOOL_LANES).toEqual({ search: 'cpu', parse: 'cpu', fetch: 'cpu', embed: 'gpu', vision: 'gpu', rerank: 'gpu' });
  });

  describe('every tool that takes a path refuses', () => {
    const tools = [parseTool, fetchTool, visionTool];

    it.each(tools.map((t) => [t.name, t] as const))('%s: a missing, empty, escaping, absolute, symlinked-out or absent path', async (_, tool) => {
      await writeFile(join(root, 'secret.txt'), 'outside the workspace');
      await symlink(join(root, 'secret.txt'), join(workspace.dir, 'link.txt'));
      await mkdir(join(workspace.dir, 'empty-dir'));
      const cases: [Record<string, string | number>, RegExp][] = [
        [{}, /'path'/],
        [{ path: '  ' }, /'path' must be a non-empty string/],
        [{ path: 7 }, /'path' must be a non-empty string/],
        [{ path: '../../acme/../secret.txt' }, /escapes the workspace/],
        [{ path: '../run-2/goal.md' }, /escapes the workspace/],
        [{ path: join(root, 'secret.txt') }, /escapes the workspace/],
        [{ path: 'link.txt' }, /escapes the workspace/],
        [{ path: 'nope.md' }, /no file 'nope.md'/],
        [{ path: 'empty-dir' }, /not a regular file/],
        [{ path: '.' }, /not a regular file/],
      ];
      for (const [args, message] of cases) {
        const attempt = tool.run(args, ctx());
        await expect(attempt).rejects.toBeInstanceOf(BadArguments);
        await expect(attempt).rejects.toThrow(message);
      }
    });
  });

  describe('parse', () => {
    it('summarises Markdown headings with their levels and the words in each section', async () => {
      await workspace.write(
        'docs/guide.md',
        [
          'Intro words before any heading.',
          '',
          '# Guide',
          '',
          'One two three four.',
          '',
          '## Install ##',
          '',
          '```sh',
          '# not a heading, but five words',
          '```',
          '',
          'Setup',
          '-----',
          'alpha beta',
          '',
          '#hashtag is not a heading either',
        ].join('\n'),
      );
      const out = await parseTool.run({ path: 'docs/guide.md' }, ctx());
      expect(out).toBe('docs/guide.md: markdown, 3 headings, 23 words -> parsed/docs/guide.md.json');
      const summary = await readJson<Record<string, unknown>>('parsed/docs/guide.md.json');
      expect(summary).toMatchObject({
        file: 'docs/guide.md',
        format: 'markdown',
        preambleWords: 5,
        headings: [
          { level: 1, text: 'Guide', line: 3, words: 4 },
          { level: 2, text: 'Install', line: 7, words: 6 },
          { level: 2, text: 'Setup', line: 13, words: 8 },
        ],
      });
      expect(beats.length).toBeGreaterThan(0);
    });

    it('summarises CSV: header, row count and an inferred type per column', async () => {
      await workspace.write(
        'data/people.csv',
        'name,age,score,active,joined,note,blank\r\n' +
          'Ada,36,9.5,true,2024-01-02,"likes ""quotes"", commas",\r\n' +
          'Bob,41,7,false,2023-12-31T10:00:00Z,"two\nlines",\r\n' +
          '\r\n' +
          'Cy,,8.25,TRUE,2022-06-30,plain,\r\n',
      );
      const out = await parseTool.run({ path: 'data/people.csv' }, ctx());
      expect(out).toBe('data/people.csv: csv, 7 columns, 3 rows -> parsed/data/people.csv.json');
      expect(await readJson('parsed/data/people.csv.json')).toMatchObject({
        format: 'csv',
        delimiter: ',',
        header: ['name', 'age', 'score', 'active', 'joined', 'note', 'blank'],
        rows: 3,
        raggedRows: 0,
        columns: [
          { name: 'name', type: 'string', empty: 0 },
          { name: 'age', type: 'integer', empty: 1 },
          { name: 'score', type: 'number', empty: 0 },
          { name: 'active', type: 'boolean', empty: 0 },
          { name: 'joined', type: 'date', empty: 0 },
          { name: 'note', type: 'string', empty: 0 },
          { name: 'blank', type: 'empty', empty: 3 },
        ],
      });
      expect(parseCsv('a,"b ""c"", d"\n"x\ny",2')).toEqual([
        ['a', 'b "c", d'],
        ['x\ny', '2'],
      ]);
    });

    it('summarises JSON: top-level keys and the type of each, or an array and its element types', async () => {
      await workspace.write('config.json', JSON.stringify({ name: 'x', retries: 3, tags: ['a'], nested: { a: 1 }, on: true, gone: null }));
      expect(await parseTool.run({ path: 'config.json' }, ctx())).toBe('config.json: json, object with 6 keys -> parsed/config.json.json');
      expect(await readJson('parsed/config.json.json')).toMatchObject({
        format: 'json',
        type: 'object',
        keys: [
          { key: 'name', type: 'string' },
          { key: 'retries', type: 'number' },
          { key: 'tags', type: 'array' },
          { key: 'nested', type: 'object' },
          { key: 'on', type: 'boolean' },
          { key: 'gone', type: 'null' },
        ],
      });
      await workspace.write('rows.data', '[{"id":1,"x":"a"},{"id":2,"x":null},3]');
      expect(await parseTool.run({ path: 'rows.data' }, ctx())).toMatch(/^rows.data: json, array of 3 elements/);
      expect(await readJson('parsed/rows.data.json')).toMatchObject({
        length: 3,
        elementTypes: { object: 2, number: 1 },
        elementKeys: [
          { key: 'id', types: ['number'] },
          { key: 'x', types: ['null', 'string'] },
        ],
      });
    });

    it('summarises plain text: lines, words and the ten most frequent terms', async () => {
      const text = 'The cache misses when the cache is cold.\nA cold cache is slow.\nWarm it up: warm, warm, warm.\n';
      await workspace.write('notes.txt', text);
      expect(await parseTool.run({ path: 'notes.txt' }, ctx())).toBe("notes.txt: text, 3 lines, 19 words, top term 'warm' -> parsed/notes.txt.json");
      const summary = await readJson<{ lines: number; words: number; topTerms: { term: string; count: number }[] }>('parsed/notes.txt.json');
      expect(summary.topTerms.slice(0, 3)).toEqual([
        { term: 'warm', count: 4 },
        { term: 'cache', count: 3 },
        { term: 'cold', count: 2 },
      ]);
      expect(summary.topTerms.map((t) => t.term)).not.toContain('the');
    });

    it('detects the format of a file without an extension by its content, and never takes script comments for headings', async () => {
      await workspace.write('README', 'Title\n=====\n\nsome words here\n');
      await workspace.write('TABLE', 'a;b;c\n1;2;3\n4;5;6\n');
      await workspace.write('run.py', '# set up\nimport os\n# tear down\n');
      expect(await parseTool.run({ path: 'README' }, ctx())).toMatch(/^README: markdown, 1 heading, 3 words/);
      expect(await parseTool.run({ path: 'TABLE' }, ctx())).toMatch(/^TABLE: csv, 3 columns, 2 rows/);
      expect(await parseTool.run({ path: 'run.py' }, ctx())).toMatch(/^run.py: text, 3 lines/);
      await workspace.write('broken.json', '{"a": ');
      expect(await parseTool.run({ path: 'broken.json' }, ctx())).toMatch(/^broken.json: text/);
      expect(await readJson('parsed/broken.json.json')).toMatchObject({ format: 'text', note: expect.stringMatching(/^not valid JSON/) });
    });

    it('refuses a file over 2 MiB and a binary file', async () => {
      await workspace.write('big.txt', 'a'.repeat(2 * 1024 * 1024 + 1));
      await expect(parseTool.run({ path: 'big.txt' }, ctx())).rejects.toThrow(new BadArguments("'big.txt' is 2097153 bytes, over the 2097152-byte limit"));
      await workspace.write('just-fits.txt', 'a'.repeat(2 * 1024 * 1024));
      await expect(parseTool.run({ path: 'just-fits.txt' }, ctx())).resolves.toBe('just-fits.txt: text, 1 line, 1 word -> parsed/just-fits.txt.json');
      await writeBytes('img.png', png(2, 2));
      await expect(parseTool.run({ path: 'img.png' }, ctx())).rejects.toThrow(/looks binary/);
    });
  });

  describe('fetch', () => {
    it('returns a workspace file with its size, by path or by workspace:// URL, and writes nothing', async () => {
      const expected = 'src/parser.txt (55 bytes, all shown)\nthe parser allocates a buffer per token\nunrelated line\n';
      expect(await fetchTool.run({ path: 'src/parser.txt' }, ctx())).toBe(expected);
      expect(await fetchTool.run({ url: 'workspace://src/parser.txt' }, ctx())).toBe(expected);
      await workspace.write('my notes/a b.md', 'spaced');
      expect(await fetchTool.run({ url: 'workspace://my%20notes/a%20b.md' }, ctx())).toBe('my notes/a b.md (6 bytes, all shown)\nspaced');
      expect(await workspace.list()).toEqual(['goal.md', 'my notes/a b.md', 'src/parser.txt']);
    });

    it('returns only the first 4 KiB of a larger file, never splitting a character', async () => {
      await workspace.write('long.txt', `${'x'.repeat(4095)}é${'y'.repeat(1000)}`);
      const out = await fetchTool.run({ path: 'long.txt' }, ctx());
      expect(out).toBe(`long.txt (5097 bytes, first 4095 shown)\n${'x'.repeat(4095)}`);
      await workspace.write('long2.txt', 'z'.repeat(10_000));
      expect(await fetchTool.run({ path: 'long2.txt' }, ctx())).toBe(`long2.txt (10000 bytes, first 4096 shown)\n${'z'.repeat(4096)}`);
      await writeBytes('img.gif', gif(3, 3));
      expect(await fetchTool.run({ path: 'img.gif' }, ctx())).toMatch(/^img.gif \(\d+ bytes, binary; not shown\)$/);
    });

    it('refuses every network URL and any other scheme: there is no outside network', async () => {
      for (const url of ['http://example.com/', 'https://example.com/x.txt', 'HTTPS://EXAMPLE.COM', 'http://127.0.0.1:8080/goal.md']) {
        await expect(fetchTool.run({ url }, ctx())).rejects.toThrow(new BadArguments('network fetches are disabled in this deployment'));
      }
      for (const url of ['file:///etc/passwd', 'ftp://example.com/f', '//example.com/x', 'goal.md']) {
        await expect(fetchTool.run({ url }, ctx())).rejects.toThrow(/only workspace:\/\/<path> URLs are accepted/);
      }
      await expect(fetchTool.run({ url: 'workspace://../run-2/x' }, ctx())).rejects.toThrow(/escapes the workspace/);
      await expect(fetchTool.run({ url: 'workspace:///etc/passwd' }, ctx())).rejects.toThrow(/escapes the workspace/);
      await expect(fetchTool.run({ url: 'workspace://%E0%A4%A' }, ctx())).rejects.toThrow(/malformed percent-encoding/);
      await expect(fetchTool.run({ path: 'goal.md', url: 'workspace://goal.md' }, ctx())).rejects.toThrow(/not both/);
      await expect(fetchTool.run({ url: '' }, ctx())).rejects.toBeInstanceOf(BadArguments);
    });
  });

  describe('vision', () => {
    it('reads the size of a PNG from its IHDR and files a report with a 16-bin byte histogram', async () => {
      const bytes = png(3, 2);
      await writeBytes('img/tiny.png', bytes);
      const out = await visionTool.run({ path: 'img/tiny.png' }, ctx());
      expect(out).toBe(`img/tiny.png: PNG 3x2 (8-bit truecolour), ${bytes.length} bytes -> vision/img/tiny.png.json`);
      const report = await readJson<{ format: string; width: number; height: number; bytes: number; histogram: number[] }>('vision/img/tiny.png.json');
      expect(report).toMatchObject({ file: 'img/tiny.png', format: 'png', width: 3, height: 2, bytes: bytes.length });
      expect(report.histogram).toHaveLength(16);
      expect(report.histogram.reduce((a, b) => a + b, 0)).toBe(bytes.length);
      expect(report.histogram[0x8]).toBeGreaterThan(0); // the 0x89 of the signature
      expect(beats.length).toBeGreaterThan(0);
    });

    it('reads the logical screen size of a GIF', async () => {
      await writeBytes('tiny.gif', gif(5, 4));
      expect(await visionTool.run({ path: 'tiny.gif' }, ctx())).toMatch(/^tiny.gif: GIF 5x4 \(89a\), \d+ bytes -> vision\/tiny.gif.json$/);
      expect(await readJson('vision/tiny.gif.json')).toMatchObject({ format: 'gif', width: 5, height: 4 });
    });

    it('reads a JPEG frame header (SOF0, SOF2) after skipping other segments; height comes before width', async () => {
      await writeBytes('photo.jpg', jpeg(20, 10));
      expect(await visionTool.run({ path: 'photo.jpg' }, ctx())).toMatch(/^photo.jpg: JPEG 20x10 \(baseline, 1 component\(s\)\)/);
      expect(await readJson('vision/photo.jpg.json')).toMatchObject({ format: 'jpeg', width: 20, height: 10 });
      expect(imageHeader(progressiveJpegHeader(640, 480))).toEqual({ format: 'jpeg', width: 640, height: 480, detail: 'progressive, 3 component(s)' });
    });

    it('refuses anything that is not a PNG, JPEG or GIF image, and truncated headers', async () => {
      await expect(visionTool.run({ path: 'goal.md' }, ctx())).rejects.toThrow(new BadArguments("'goal.md': not a PNG, JPEG or GIF image"));
      await writeBytes('cut.png', png(3, 2).subarray(0, 20));
      await expect(visionTool.run({ path: 'cut.png' }, ctx())).rejects.toThrow(/PNG without a valid IHDR/);
      await writeBytes('cut.jpg', jpeg(8, 8).subarray(0, 30));
      await expect(visionTool.run({ path: 'cut.jpg' }, ctx())).rejects.toThrow(/JPEG without a start-of-frame/);
      await writeBytes('cut.gif', gif(2, 2).subarray(0, 8));
      await expect(visionTool.run({ path: 'cut.gif' }, ctx())).rejects.toThrow(/GIF without a logical screen/);
      expect(await workspace.list()).not.toContainEqual(expect.stringMatching(/^vision\//));
    });
  });

  describe('rerank', () => {
    const passages = [
      'The weather today is sunny with a light breeze.',
      'The memory leak in the parser comes from a buffer allocated per token and never freed.',
      'Parsers turn tokens into trees.',
      'Our team had lunch at noon.',
    ];

    it('bm25 ranks the obviously relevant passage first, and is deterministic', () => {
      const ranked = bm25('parser memory leak', passages);
      expect(ranked[0].index).toBe(1);
      expect(ranked[0].score).toBeGreaterThan(0);
      expect(ranked.slice(1).every((h) => h.score === 0)).toBe(true);
      expect(ranked.map((h) => h.index)).toEqual([1, 0, 2, 3]); // ties keep passage order
      expect(bm25('parser memory leak', passages)).toEqual(ranked);
      expect(bm25('nothing', [])).toEqual([]);
    });

    it('IDF makes a rare term outweigh a common one', () => {
      const docs = ['common alpha beta', 'rare alpha beta', 'common gamma delta', 'common epsilon zeta'];
      const scores = new Map(bm25('common rare', docs).map((h) => [h.index, h.score]));
      expect(bm25('common rare', docs)[0].index).toBe(1);
      expect(scores.get(1)).toBeGreaterThan(2 * (scores.get(0) ?? 0));
      expect(scores.get(0)).toBeGreaterThan(0);
    });

    it('length normalisation prefers the shorter of two passages with the same matches', () => {
      const ranked = bm25('leak', ['leak in a long passage with many other words around it', 'leak here']);
      expect(ranked[0].index).toBe(1);
    });

    it('splits text into paragraph passages of at most ~500 characters, keeping their line numbers', () => {
      const sentence = 'This sentence has exactly fifty characters in it. ';
      const long = sentence.repeat(15).trim();
      const split = splitPassages(`first para\nline two\n\n\n${long}\n\nlast`);
      expect(split[0]).toEqual({ line: 1, text: 'first para\nline two' });
      expect(split.slice(1, -1).map((p) => p.text.length)).toEqual([499, 249]);
      expect(split.slice(1, -1).every((p) => p.line === 5 && p.text.endsWith('.'))).toBe(true);
      expect(split[split.length - 1]).toEqual({ line: 7, text: 'last' });
      expect(splitPassages('x'.repeat(1200)).map((p) => p.text.length)).toEqual([500, 500, 200]);
    });

    it('ranks workspace passages, skipping tool outputs and binary files, and files the top k', async () => {
      await workspace.write('docs/weather.md', `${passages[0]}\n\n${passages[3]}\n`);
      await workspace.write('docs/parser-notes.md', `# Notes\n\n${passages[2]}\n\n${passages[1]}\n`);
      await workspace.write('vectors/old.json', 'parser memory leak parser memory leak');
      await workspace.write('parsed/goal.md.json', 'parser memory leak parser memory leak');
      await workspace.write('vision/x.json', 'parser memory leak');
      await workspace.write('rerank/step-1.json', 'parser memory leak');
      await writeBytes('img.png', png(4, 4));
      const out = await rerankTool.run({ query: 'parser memory leak', k: 2, step: 3 }, ctx());
      expect(out).toMatch(/^top 2 of 8 passages in 4 files; best goal.md:3 \(\d+\.\d{3}\): find the memory leak in the parser -> rerank\/step-3.json$/);
      const report = await readJson<{ k: number; files: number; results: { rank: number; file: string; line: number; score: number; text: string }[] }>('rerank/step-3.json');
      expect(report).toMatchObject({ k: 2, files: 4 });
      expect(report.results.map((r) => [r.rank, r.file, r.line])).toEqual([
        [1, 'goal.md', 3],
        [2, 'docs/parser-notes.md', 5],
      ]);
      expect(report.results[0].score).toBeGreaterThan(report.results[1].score);
      // One beat per candidate file (docs/parser-notes.md, docs/weather.md, goal.md, img.png, src/parser.txt), one when done.
      expect(beats).toEqual([0, 1, 2, 3, 4, 5]);
    });

    it('defaults k to 5, accepts it as a numeric string, and refuses anything outside 1-50', async () => {
      for (let i = 0; i < 7; i++) await workspace.write(`p${i}.txt`, `parser note ${i}`);
      expect(await rerankTool.run({ query: 'parser' }, ctx())).toMatch(/^top 5 of /);
      expect(await rerankTool.run({ query: 'parser', k: '3' }, ctx())).toMatch(/^top 3 of /);
      expect(await rerankTool.run({ query: 'zzz unknown' }, ctx())).toMatch(/^no passage of \d+ in 9 files matches 'zzz unknown'/);
      for (const k of [0, 51, 2.5, -1, 'abc', '']) {
        await expect(rerankTool.run({ query: 'parser', k }, ctx())).rejects.toThrow(new BadArguments("argument 'k' must be an integer from 1 to 50"));
      }
      await expect(rerankTool.run({}, ctx())).rejects.toThrow(/'query' must be a non-empty string/);
      await expect(rerankTool.run({ query: '?! a' }, ctx())).rejects.toThrow(/no terms to rank by/);
    });
  });
});
