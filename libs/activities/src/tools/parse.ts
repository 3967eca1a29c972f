import { extname } from 'node:path';
import { BadArguments, looksBinary, readBytes, requireString, tokenize, workspaceFile, type Tool } from './common';

export const PARSE_MAX_BYTES = 2 * 1024 * 1024;

export type JsonType = 'null' | 'boolean' | 'number' | 'string' | 'array' | 'object';
export type CsvColumnType = 'empty' | 'boolean' | 'integer' | 'number' | 'date' | 'string';

export interface JsonSummary {
  format: 'json';
  type: JsonType;
  /** For an object: its keys and the type of each value, in document order (at most 200). */
  keys?: { key: string; type: JsonType }[];
  keyCount?: number;
  /** For an array: its length and how many elements have each type. */
  length?: number;
  elementTypes?: Partial<Record<JsonType, number>>;
  /** For an array of objects: the union of their keys, with every type seen for each (at most 200). */
  elementKeys?: { key: string; types: JsonType[] }[];
}

export interface MarkdownSummary {
  format: 'markdown';
  /** Every heading (ATX `#` and single-line setext), with the words in its section up to the next heading. */
  headings: { level: number; text: string; line: number; words: number }[];
  /** Words before the first heading. */
  preambleWords: number;
  words: number;
}

export interface CsvSummary {
  format: 'csv';
  delimiter: string;
  header: string[];
  rows: number;
  /** Rows whose field count differs from the header's. */
  raggedRows: number;
  columns: { name: string; type: CsvColumnType; empty: number }[];
}

export interface TextSummary {
  format: 'text';
  lines: number;
  words: number;
  /** The ten most frequent terms (common English stop words and terms over 40 characters left out), ties in alphabetical order. */
  topTerms: { term: string; count: number }[];
  note?: string;
}

export type StructureSummary = JsonSummary | MarkdownSummary | CsvSummary | TextSummary;

const WORDS = /[\p{L}\p{N}]+(?:['’][\p{L}\p{N}]+)*/gu;
const countWords = (text: string) => text.match(WORDS)?.length ?? 0;
const MAX_KEYS = 200;

function jsonType(value: unknown): JsonType {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  const type = typeof value;
  return type === 'boolean' || type === 'number' || type === 'string' ? type : 'object';
}

export function summarizeJson(value: unknown): JsonSummary {
  const type = jsonType(value);
  if (type === 'object') {
    const entries = Object.entries(value as Record<string, unknown>);
    return { format: 'json', type, keyCount: entries.length, keys: entries.slice(0, MAX_KEYS).map(([key, v]) => ({ key, type: jsonType(v) })) };
  }
  if (type !== 'array') return { format: 'json', type };
  const items = value as unknown[];
  const elementTypes: Partial<Record<JsonType, number>> = {};
  const elementKeys = new Map<string, Set<JsonType>>();
  for (const item of items) {
    const t = jsonType(item);
    elementTypes[t] = (elementTypes[t] ?? 0) + 1;
    if (t !== 'object') continue;
    for (const [key, v] of Object.entries(item as Record<string, unknown>)) {
      if (!elementKeys.has(key) && elementKeys.size >= MAX_KEYS) continue;
      elementKeys.set(key, (elementKeys.get(key) ?? new Set()).add(jsonType(v)));
    }
  }
  const summary: JsonSummary = { format: 'json', type, length: items.length, elementTypes };
  if (elementKeys.size) summary.elementKeys = [...elementKeys].map(([key, types]) => ({ key, types: [...types].sort() }));
  return summary;
}

const FENCE = /^ {0,3}(`{3,}|~{3,})/;
const ATX = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$/;
const SETEXT = /^ {0,3}(=+|-+)[ \t]*$/;

export function summarizeMarkdown(text: string): MarkdownSummary {
  const headings: MarkdownSummary['headings'] = [];
  let preambleWords = 0;
  const addWords = (n: number) => {
    if (headings.length) headings[headings.length - 1].words += n;
    else preambleWords += n;
  };
  let fence: string | undefined;
  // The last line, if it could be the text of a setext heading: a lone paragraph line.
  let candidate: { text: string; line: number; words: number } | undefined;
  let previousBlank = true;
  const lines = text.split(/\r?\n/);
  for (const [i, line] of lines.entries()) {
    const opener = FENCE.exec(line)?.[1];
    if (fence !== undefined) {
      const closes = opener !== undefined && opener[0] === fence[0] && opener.length >= fence.length && line.trim() === opener;
      if (closes) fence = undefined;
      else addWords(countWords(line));
      candidate = undefined;
      previousBlank = closes;
      continue;
    }
    if (opener) {
      fence = opener;
      candidate = undefined;
      previousBlank = false;
      continue;
    }
    const atx = ATX.exec(line);
    const setext = SETEXT.exec(line);
    if (setext && candidate) {
      addWords(-candidate.words);
      headings.push({ level: setext[1][0] === '=' ? 1 : 2, text: candidate.text, line: candidate.line, words: 0 });
      candidate = undefined;
    } else if (atx) {
      const title = (atx[2] ?? '').replace(/(^|[ \t]+)#+$/, '').trim();
      headings.push({ level: atx[1].length, text: title, line: i + 1, words: 0 });
      candidate = undefined;
    } else {
      const words = countWords(line);
      addWords(words);
      const blank = line.trim() === '';
      candidate = !blank && !setext && previousBlank && !/^ {0,3}([-*+>]|\d+[.)])(\s|$)/.test(line) ? { text: line.trim(), line: i + 1, words } : undefined;
      previousBlank = blank;
      continue;
    }
    previousBlank = true;
  }
  return { format: 'markdown', headings, preambleWords, words: headings.reduce((n, h) => n + h.words, preambleWords) };
}

/** RFC 4180 records: quoted fields may hold delimiters, `""` and line breaks; blank lines are skipped. */
export function parseCsv(text: string, delimiter = ','): string[][] {
  const records: string[][] = [];
  let record: string[] = [];
  let field = '';
  let quoted = false;
  let fieldStarted = false;
  const endRecord = () => {
    record.push(field);
    if (record.length > 1 || record[0] !== '' || fieldStarted) records.push(record);
    record = [];
    field = '';
    fieldStarted = false;
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c !== '"') {
        field += c;
      } else if (text[i + 1] === '"') {
        field += '"';
        i++;
      } else {
        quoted = false;
      }
    } else if (c === '"' && field === '') {
      quoted = true;
      fieldStarted = true;
    } else if (c === delimiter) {
      record.push(field);
      field = '';
      fieldStarted = true;
    } else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      endRecord();
    } else {
      field += c;
    }
  }
  if (field !== '' || record.length || fieldStarted) endRecord();
  return records;
}

/** The delimiter (`,`, `;` or tab) that occurs most often, outside quotes, in the first line; undefined when none does. */
export function sniffDelimiter(text: string): string | undefined {
  const counts = new Map<string, number>();
  let quoted = false;
  for (const c of text) {
    if (c === '"') quoted = !quoted;
    else if (!quoted && (c === '\n' || c === '\r')) break;
    else if (!quoted && (c === ',' || c === ';' || c === '\t')) counts.set(c, (counts.get(c) ?? 0) + 1);
  }
  let best: string | undefined;
  for (const [c, n] of counts) if (best === undefined || n > (counts.get(best) ?? 0)) best = c;
  return best;
}

const BOOLEAN = /^(true|false)$/i;
const INTEGER = /^[+-]?\d+$/;
const NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i;
const DATE = /^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/;

function valueType(value: string): Exclude<CsvColumnType, 'empty'> {
  if (BOOLEAN.test(value)) return 'boolean';
  if (INTEGER.test(value)) return 'integer';
  if (NUMBER.test(value)) return 'number';
  if (DATE.test(value) && !Number.isNaN(Date.parse(value))) return 'date';
  return 'string';
}

function columnType(types: Set<Exclude<CsvColumnType, 'empty'>>): CsvColumnType {
  if (types.size === 0) return 'empty';
  if (types.size === 1) return [...types][0];
  if (types.size === 2 && types.has('integer') && types.has('number')) return 'number';
  return 'string';
}

export function summarizeCsv(records: string[][], delimiter: string): CsvSummary {
  const [header = [], ...rows] = records;
  const columns = header.map((name, c) => {
    const types = new Set<Exclude<CsvColumnType, 'empty'>>();
    let empty = 0;
    for (const row of rows) {
      const value = (row[c] ?? '').trim();
      if (value === '') empty++;
      else types.add(valueType(value));
    }
    return { name, type: columnType(types), empty };
  });
  const raggedRows = rows.filter((row) => row.length !== header.length).length;
  return { format: 'csv', delimiter, header, rows: rows.length, raggedRows, columns };
}

const STOP_WORDS = new Set(
  ('a an and are as at be been but by can do does for from had has have he her his if in into is it its me my no not of on or our she so ' +
    'such than that the their them then there these they this those to too us was we were what when where which who will with would you your')
    .split(' '),
);

/** Longer "terms" are hashes, base64 or minified code, not words. */
const MAX_TERM = 40;

export function summarizeText(text: string): TextSummary {
  const counts = new Map<string, number>();
  for (const term of tokenize(text)) if (term.length <= MAX_TERM && !STOP_WORDS.has(term)) counts.set(term, (counts.get(term) ?? 0) + 1);
  const topTerms = [...counts]
    .sort(([a, x], [b, y]) => y - x || (a < b ? -1 : a > b ? 1 : 0))
    .slice(0, 10)
    .map(([term, count]) => ({ term, count }));
  const lines = text === '' ? 0 : text.split(/\r?\n/).length - (/\r?\n$/.test(text) ? 1 : 0);
  return { format: 'text', lines, words: countWords(text), topTerms };
}

function tryJson(text: string): { ok: true; value: unknown } | { ok: false; error: string } {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (err) {
    return { ok: false, error: (err as Error).message };
  }
}

/** Whether the first lines look like a table: at least two records, all with the header's field count (two or more). */
function looksLikeCsv(text: string, delimiter: string): boolean {
  const sample = parseCsv(text.split(/\r?\n/).slice(0, 50).join('\n'), delimiter);
  return sample.length >= 2 && sample[0].length >= 2 && sample.every((r) => r.length === sample[0].length);
}

const KNOWN = ['.json', '.md', '.markdown', '.csv', '.tsv', '.txt', '.log'];

/**
 * Detects the format and summarises the structure. The extension decides first (.json, .md/.markdown,
 * .csv/.tsv, .txt/.log). Any other file that parses as a JSON object or array is JSON. A file with no
 * extension at all (README, NOTES) is Markdown if it has a heading, CSV if its first lines form a
 * table; everything else is plain text: `# comment` lines in a script are not headings, and commas
 * in code are not columns. A `.json` file that does not parse is summarised as text, with a note.
 */
export function summarize(text: string, path: string): StructureSummary {
  const ext = extname(path).toLowerCase();
  if (ext === '.json' || (!KNOWN.includes(ext) && /^[[{]/.test(text.trimStart()))) {
    const parsed = tryJson(text);
    if (parsed.ok) return summarizeJson(parsed.value);
    if (ext === '.json') return { ...summarizeText(text), note: `not valid JSON: ${parsed.error}` };
  }
  if (ext === '.md' || ext === '.markdown') return summarizeMarkdown(text);
  if (ext === '.csv' || ext === '.tsv') {
    const delimiter = ext === '.tsv' ? '\t' : (sniffDelimiter(text) ?? ',');
    return summarizeCsv(parseCsv(text, delimiter), delimiter);
  }
  if (ext !== '') return summarizeText(text);
  const markdown = summarizeMarkdown(text);
  if (markdown.headings.some((h) => h.text !== '')) return markdown;
  const delimiter = sniffDelimiter(text);
  if (delimiter && looksLikeCsv(text, delimiter)) return summarizeCsv(parseCsv(text, delimiter), delimiter);
  return summarizeText(text);
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

function describe(s: StructureSummary): string {
  switch (s.format) {
    case 'json':
      if (s.type === 'object') return `object with ${plural(s.keyCount ?? 0, 'key')}`;
      if (s.type === 'array') return `array of ${plural(s.length ?? 0, 'element')}`;
      return s.type;
    case 'markdown':
      return `${plural(s.headings.length, 'heading')}, ${plural(s.words, 'word')}`;
    case 'csv':
      return `${plural(s.columns.length, 'column')}, ${plural(s.rows, 'row')}`;
    case 'text':
      return `${plural(s.lines, 'line')}, ${plural(s.words, 'word')}${s.topTerms.length ? `, top term '${s.topTerms[0].term}'` : ''}`;
  }
}

/** Reads a workspace file (up to 2 MiB), detects JSON / Markdown / CSV / text, and files a structure summary as `parsed/<path>.json`. */
export const parseTool: Tool = {
  name: 'parse',
  async run(args, ctx) {
    const file = await workspaceFile(ctx.workspace, requireString(args, 'path'));
    ctx.heartbeat({ done: 0, of: 2 });
    const bytes = await readBytes(file, PARSE_MAX_BYTES);
    if (looksBinary(bytes)) throw new BadArguments(`'${file.rel}' looks binary; parse reads JSON, Markdown, CSV or plain text`);
    const text = bytes.toString('utf8').replace(/^\uFEFF/, '');
    const summary = summarize(text, file.rel);
    ctx.heartbeat({ done: 1, of: 2 });
    const out = `parsed/${file.rel}.json`;
    await ctx.workspace.write(out, JSON.stringify({ file: file.rel, bytes: file.size, ...summary }, null, 2));
    ctx.heartbeat({ done: 2, of: 2 });
    return `${file.rel}: ${summary.format}, ${describe(summary)} -> ${out}`;
  },
};
