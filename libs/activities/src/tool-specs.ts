import type { ToolSpec } from './llm';

const string = { type: 'string' } as const;

/** The tools a model may call, in the function-calling shape, with the arguments each takes. */
const SPECS: Record<string, ToolSpec> = {
  search: spec('search', 'Find lines in the workspace that match a query', { query: string }),
  embed: spec('embed', 'Embed a text as a hashed feature vector', { text: string }),
  parse: spec('parse', 'Describe the structure of a workspace file', { path: string }),
  fetch: spec('fetch', 'Read the start of a workspace file', { path: string }),
  vision: spec('vision', 'Describe an image in the workspace', { path: string }),
  rerank: spec('rerank', 'Rank workspace passages against a query (BM25)', { query: string, k: { type: 'integer', minimum: 1, maximum: 50 } }),
};

function spec(name: string, description: string, properties: Record<string, unknown>): ToolSpec {
  const required = Object.keys(properties).filter((k) => k !== 'k');
  return { type: 'function', function: { name, description, parameters: { type: 'object', properties, required, additionalProperties: false } } };
}

export function toolSpecsFor(names: string[]): ToolSpec[] {
  return names.map((name) => {
    const found = SPECS[name];
    if (!found) throw new Error(`no tool named '${name}'`);
    return found;
  });
}
