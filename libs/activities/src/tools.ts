import { toolsOnLane, type ToolName } from '@agentrun/contracts';
import { terms, requireString, type Tool } from './tools/common';
import { fetchTool } from './tools/fetch';
import { parseTool } from './tools/parse';
import { rerankTool } from './tools/rerank';
import { visionTool } from './tools/vision';

export { BadArguments, type Tool, type ToolContext } from './tools/common';
export * from './tools/fetch';
export * from './tools/parse';
export * from './tools/rerank';
export * from './tools/vision';

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

/** Each tool of the contracts' catalogue, by name: the lane that serves it is the catalogue's. */
const TOOLS_BY_NAME: Readonly<Record<ToolName, Tool>> = {
  search: searchTool,
  parse: parseTool,
  fetch: fetchTool,
  embed: embedTool,
  vision: visionTool,
  rerank: rerankTool,
};

/** Served by the orchestrator's CPU lane. */
export const CPU_TOOLS: Tool[] = toolsOnLane('cpu').map((name) => TOOLS_BY_NAME[name]);
/** Served by the GPU worker's lane; today CPU algorithms that a GPU model can replace behind the same name. */
export const GPU_TOOLS: Tool[] = toolsOnLane('gpu').map((name) => TOOLS_BY_NAME[name]);

export { TOOL_LANES, type ToolLane } from '@agentrun/contracts';
