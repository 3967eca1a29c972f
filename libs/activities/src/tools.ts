import type { Workspace } from './workspace';

export class BadArguments extends Error {
  override readonly name = 'BadArguments';
}

export interface ToolContext {
  workspace: Workspace;
  step: number;
  /** Called between units of work so a stalled attempt is noticed and a retry can resume. */
  heartbeat(progress: { done: number; of: number }): void;
}

export interface Tool {
  readonly name: string;
  run(args: Record<string, string | number>, ctx: ToolContext): Promise<string>;
}

const WORD = /[\p{L}\p{N}]{2,}/gu;

function terms(text: string): string[] {
  return (text.toLowerCase().match(WORD) ?? []).slice(0, 64);
}

function requireString(args: Record<string, string | number>, name: string): string {
  const value = args[name];
  if (typeof value !== 'string' || value.trim() === '') throw new BadArguments(`argument '${name}' must be a non-empty string`);
  return value;
}

/** Finds the workspace lines that share the most terms with the query, and files its findings. */
export const searchTool: Tool = {
  name: 'search',
  async run(args, ctx) {
    const wanted = new Set(terms(requireString(args, 'query')));
    const files = (await ctx.workspace.list()).filter((f) => !f.startsWith('vectors/'));
    const hits: { file: string; line: string; score: number }[] = [];
    for (const [i, file] of files.entries()) {
      ctx.heartbeat({ done: i, of: files.length });
      if ((await ctx.workspace.size(file)) > 1_000_000) continue;
      for (const line of (await ctx.workspace.read(file)).split('\n')) {
        const score = terms(line).filter((t) => wanted.has(t)).length;
        if (score > 0) hits.push({ file, line: line.trim().slice(0, 200), score });
      }
    }
    hits.sort((a, b) => b.score - a.score || a.file.localeCompare(b.file));
    const top = hits.slice(0, 5);
    const report = top.length
      ? top.map((h) => `${h.file}: ${h.line}`).join('\n')
      : `no line in ${files.length} files mentions ${[...wanted].join(', ')}`;
    await ctx.workspace.write(`notes/step-${ctx.step}-search.md`, `# search: ${args.query}\n\n${report}\n`);
    return `${hits.length} matching lines in ${files.length} files; best: ${top[0]?.line ?? 'none'}`;
  },
};

export const EMBEDDING_DIMENSIONS = 64;

/** Feature hashing: each term adds a signed unit to one of 64 buckets; the vector is L2-normalised. */
export function embed(text: string, dims = EMBEDDING_DIMENSIONS): number[] {
  const vector = new Array<number>(dims).fill(0);
  for (const term of terms(text)) {
    let h = 2166136261;
    for (let i = 0; i < term.length; i++) h = Math.imul(h ^ term.charCodeAt(i), 16777619) >>> 0;
    vector[h % dims] += h & 0x80000000 ? -1 : 1;
  }
  const norm = Math.hypot(...vector) || 1;
  return vector.map((v) => Math.round((v / norm) * 1e6) / 1e6);
}

export const embedTool: Tool = {
  name: 'embed',
  async run(args, ctx) {
    const text = requireString(args, 'text');
    ctx.heartbeat({ done: 0, of: 1 });
    const vector = embed(text);
    await ctx.workspace.write(`vectors/step-${ctx.step}.json`, JSON.stringify({ text, vector }));
    const nonZero = vector.filter((v) => v !== 0).length;
    return `embedded ${terms(text).length} terms into ${EMBEDDING_DIMENSIONS} dims (${nonZero} non-zero)`;
  },
};

export const CPU_TOOLS: Tool[] = [searchTool];
export const GPU_TOOLS: Tool[] = [embedTool];
