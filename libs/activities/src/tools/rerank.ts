import { BadArguments, looksBinary, oneLine, readBytes, requireString, tokenize, workspaceFile, type Tool } from './common';

export const BM25_K1 = 1.2;
export const BM25_B = 0.75;
export const PASSAGE_MAX_CHARS = 500;
/** Tool outputs that are not workspace text: vectors, structure summaries, image reports and earlier rankings. */
export const RERANK_SKIPPED_DIRS = ['vectors/', 'parsed/', 'vision/', 'rerank/'];
const RERANK_MAX_FILE_BYTES = 1_000_000;

export interface Bm25Hit {
  /** Index into the passages given to `bm25`. */
  index: number;
  score: number;
}

/**
 * Okapi BM25 of every passage for the query, best first (ties in passage order). Query terms count once
 * each; IDF is the non-negative form ln(1 + (N - df + 0.5) / (df + 0.5)), so a term in every passage
 * still scores a little, and a rare term outweighs a common one. Pure and deterministic.
 */
export function bm25(query: string, passages: readonly string[], { k1 = BM25_K1, b = BM25_B } = {}): Bm25Hit[] {
  const wanted = [...new Set(tokenize(query))];
  const docs = passages.map((passage) => {
    const tokens = tokenize(passage);
    const tf = new Map<string, number>();
    for (const t of tokens) if (wanted.includes(t)) tf.set(t, (tf.get(t) ?? 0) + 1);
    return { length: tokens.length, tf };
  });
  const n = docs.length;
  const avgdl = docs.reduce((sum, d) => sum + d.length, 0) / (n || 1);
  const idf = new Map<string, number>();
  for (const t of wanted) {
    const df = docs.filter((d) => d.tf.has(t)).length;
    idf.set(t, Math.log(1 + (n - df + 0.5) / (df + 0.5)));
  }
  const hits = docs.map(({ length, tf }, index) => {
    let score = 0;
    for (const [t, f] of tf) score += ((idf.get(t) ?? 0) * (f * (k1 + 1))) / (f + k1 * (1 - b + (b * length) / (avgdl || 1)));
    return { index, score };
  });
  return hits.sort((x, y) => y.score - x.score || x.index - y.index);
}

export interface Passage {
  /** 1-based line of the passage's first character in its file. */
  line: number;
  text: string;
}

const SENTENCE_END = /[.!?]["')\]]*(?=\s)/g;

/** Cuts a paragraph into pieces of at most `max` characters, after a sentence where possible, else at a space. */
function chunk(text: string, max: number): { offset: number; text: string }[] {
  const out: { offset: number; text: string }[] = [];
  let start = 0;
  while (start < text.length) {
    while (start < text.length && /\s/.test(text[start])) start++;
    if (start >= text.length) break;
    let end = Math.min(text.length, start + max);
    if (end < text.length) {
      const window = text.slice(start, end + 1);
      let cut = 0;
      for (const m of window.matchAll(SENTENCE_END)) if (m.index + m[0].length <= max) cut = m.index + m[0].length;
      if (cut < max / 2) cut = Math.max(cut, window.search(/\s\S*$/));
      end = start + (cut > 0 ? cut : max);
    }
    out.push({ offset: start, text: text.slice(start, end).trim() });
    start = end;
  }
  return out;
}

/** Paragraphs (separated by blank lines); one longer than `max` characters becomes several passages. */
export function splitPassages(text: string, max = PASSAGE_MAX_CHARS): Passage[] {
  const passages: Passage[] = [];
  const lines = text.split(/\r?\n/);
  let para: string[] = [];
  let first = 0;
  const flush = () => {
    const body = para.join('\n');
    para = [];
    for (const piece of chunk(body, max)) {
      const line = first + 1 + (body.slice(0, piece.offset).match(/\n/g)?.length ?? 0);
      if (piece.text) passages.push({ line, text: piece.text });
    }
  };
  for (const [i, line] of lines.entries()) {
    if (line.trim() === '') {
      if (para.length) flush();
      continue;
    }
    if (!para.length) first = i;
    para.push(line);
  }
  if (para.length) flush();
  return passages;
}

function parseK(value: string | number | undefined): number {
  if (value === undefined) return 5;
  const k = typeof value === 'number' ? value : /^\s*\d+\s*$/.test(value) ? Number(value) : NaN;
  if (!Number.isInteger(k) || k < 1 || k > 50) throw new BadArguments("argument 'k' must be an integer from 1 to 50");
  return k;
}

const round = (x: number) => Math.round(x * 1e6) / 1e6;

/**
 * Passage ranking with BM25 (k1 = 1.2, b = 0.75) on the CPU, standing in for a GPU cross-encoder: every
 * text file in the workspace (outside the tools' own output directories, up to 1 MB, not binary) is cut
 * into passages, and the top k (default 5) are filed as `rerank/step-<step>.json`.
 */
export const rerankTool: Tool = {
  name: 'rerank',
  async run(args, ctx) {
    const query = requireString(args, 'query');
    const k = parseK(args.k);
    if (tokenize(query).length === 0) throw new BadArguments('the query has no terms to rank by (words of two or more letters or digits)');
    const files = (await ctx.workspace.list()).filter((f) => !RERANK_SKIPPED_DIRS.some((dir) => f.startsWith(dir)));
    const passages: (Passage & { file: string })[] = [];
    let read = 0;
    for (const [i, name] of files.entries()) {
      ctx.heartbeat({ done: i, of: files.length });
      let bytes: Buffer;
      let rel: string;
      try {
        const file = await workspaceFile(ctx.workspace, name);
        if (file.size > RERANK_MAX_FILE_BYTES) continue;
        bytes = await readBytes(file, RERANK_MAX_FILE_BYTES);
        rel = file.rel;
      } catch (err) {
        if (err instanceof BadArguments || (err as NodeJS.ErrnoException).code === 'ENOENT') continue; // gone since the listing
        throw err;
      }
      if (looksBinary(bytes)) continue;
      read++;
      for (const p of splitPassages(bytes.toString('utf8'))) passages.push({ file: rel, ...p });
    }
    const ranked = bm25(query, passages.map((p) => p.text));
    ctx.heartbeat({ done: files.length, of: files.length });
    const top = ranked
      .filter((h) => h.score > 0)
      .slice(0, k)
      .map((h, rank) => ({ rank: rank + 1, file: passages[h.index].file, line: passages[h.index].line, score: round(h.score), text: passages[h.index].text }));
    const out = `rerank/step-${ctx.step}.json`;
    await ctx.workspace.write(out, JSON.stringify({ query, k, files: read, passages: passages.length, results: top }, null, 2));
    const best = top[0];
    if (!best) return `no passage of ${passages.length} in ${read} files matches '${oneLine(query, 60)}' -> ${out}`;
    return `top ${top.length} of ${passages.length} passages in ${read} files; best ${best.file}:${best.line} (${best.score.toFixed(3)}): ${oneLine(best.text, 100)} -> ${out}`;
  },
};
