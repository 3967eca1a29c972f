import { Type, type Static, type TObject } from '@sinclair/typebox';
import { plainSchema } from './schema';
import { TOOL_LANES, type ToolLane, type ToolName } from './tool-names';

export interface ToolDefinition<A extends TObject = TObject> {
  lane: ToolLane;
  /** What the model is told the tool does. */
  description: string;
  /** The arguments the tool takes, as the model must send them. */
  args: A;
}

const Path = () => Type.String();
const Args = <P extends Parameters<typeof Type.Object>[0]>(properties: P) => Type.Object(properties, { additionalProperties: false });

/**
 * Every tool an agent may run: the planner picks from it, the activities serve it on its lane, and
 * the model is offered it as a function. Its names, lanes and order are `TOOL_LANES`' (tool-names.ts).
 */
export const TOOL_CATALOGUE = {
  search: { lane: TOOL_LANES.search, description: 'Find lines in the workspace that match a query', args: Args({ query: Type.String() }) },
  parse: { lane: TOOL_LANES.parse, description: 'Describe the structure of a workspace file', args: Args({ path: Path() }) },
  fetch: { lane: TOOL_LANES.fetch, description: 'Read the start of a workspace file', args: Args({ path: Path() }) },
  embed: { lane: TOOL_LANES.embed, description: 'Embed a text as a hashed feature vector', args: Args({ text: Type.String() }) },
  vision: { lane: TOOL_LANES.vision, description: 'Describe an image in the workspace', args: Args({ path: Path() }) },
  rerank: {
    lane: TOOL_LANES.rerank,
    description: 'Rank workspace passages against a query (BM25)',
    args: Args({ query: Type.String(), k: Type.Optional(Type.Integer({ minimum: 1, maximum: 50 })) }),
  },
} as const satisfies Record<ToolName, ToolDefinition>;

export type ToolArgsOf<T extends ToolName> = Static<(typeof TOOL_CATALOGUE)[T]['args']>;

/** A tool in the function-calling shape a chat model is offered. */
export interface ToolFunctionSpec {
  type: 'function';
  function: { name: ToolName; description: string; parameters: Record<string, unknown> };
}

export function toolFunctionSpec(name: ToolName): ToolFunctionSpec {
  const { description, args } = TOOL_CATALOGUE[name];
  const { properties, required = [] } = plainSchema(args) as { properties: Record<string, unknown>; required?: string[] };
  return { type: 'function', function: { name, description, parameters: { type: 'object', properties, required, additionalProperties: false } } };
}
