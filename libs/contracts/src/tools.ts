import { Type, type Static, type TObject } from '@sinclair/typebox';
import { plainSchema } from './schema';

export const TOOL_LANE_NAMES = ['cpu', 'gpu'] as const;
/** `cpu` tools run on the orchestrator's CPU lane, `gpu` tools on the GPU worker's lane. */
export type ToolLane = (typeof TOOL_LANE_NAMES)[number];

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
 * the model is offered it as a function. Order is the order tools are offered to the model.
 */
export const TOOL_CATALOGUE = {
  search: { lane: 'cpu', description: 'Find lines in the workspace that match a query', args: Args({ query: Type.String() }) },
  parse: { lane: 'cpu', description: 'Describe the structure of a workspace file', args: Args({ path: Path() }) },
  fetch: { lane: 'cpu', description: 'Read the start of a workspace file', args: Args({ path: Path() }) },
  embed: { lane: 'gpu', description: 'Embed a text as a hashed feature vector', args: Args({ text: Type.String() }) },
  vision: { lane: 'gpu', description: 'Describe an image in the workspace', args: Args({ path: Path() }) },
  rerank: {
    lane: 'gpu',
    description: 'Rank workspace passages against a query (BM25)',
    args: Args({ query: Type.String(), k: Type.Optional(Type.Integer({ minimum: 1, maximum: 50 })) }),
  },
} as const satisfies Record<string, ToolDefinition>;

export type ToolName = keyof typeof TOOL_CATALOGUE;
export type ToolArgsOf<T extends ToolName> = Static<(typeof TOOL_CATALOGUE)[T]['args']>;

export const TOOL_NAMES = Object.keys(TOOL_CATALOGUE) as ToolName[];

/** Which lane serves each tool, by tool name. */
export const TOOL_LANES = Object.fromEntries(TOOL_NAMES.map((name) => [name, TOOL_CATALOGUE[name].lane])) as Readonly<Record<ToolName, ToolLane>>;

export function isToolName(name: string): name is ToolName {
  return Object.prototype.hasOwnProperty.call(TOOL_CATALOGUE, name);
}

export function toolsOnLane(lane: ToolLane): ToolName[] {
  return TOOL_NAMES.filter((name) => TOOL_CATALOGUE[name].lane === lane);
}

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
