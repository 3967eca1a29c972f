/**
 * The tools by name and lane, without their argument schemas: workflow code reads these, and a module
 * that builds no schema costs nothing when every new workflow execution initialises its modules again.
 * `TOOL_CATALOGUE` (tools.ts) adds each tool's description and arguments.
 */
export const TOOL_LANE_NAMES = ['cpu', 'gpu'] as const;
/** `cpu` tools run on the orchestrator's CPU lane, `gpu` tools on the GPU worker's lane. */
export type ToolLane = (typeof TOOL_LANE_NAMES)[number];

/** Which lane serves each tool, by tool name, in the order tools are offered to the model. */
export const TOOL_LANES = {
  search: 'cpu',
  parse: 'cpu',
  fetch: 'cpu',
  embed: 'gpu',
  vision: 'gpu',
  rerank: 'gpu',
} as const satisfies Record<string, ToolLane>;

export type ToolName = keyof typeof TOOL_LANES;

export const TOOL_NAMES = Object.keys(TOOL_LANES) as ToolName[];

export function isToolName(name: string): name is ToolName {
  return Object.prototype.hasOwnProperty.call(TOOL_LANES, name);
}

export function toolsOnLane(lane: ToolLane): ToolName[] {
  return TOOL_NAMES.filter((name) => TOOL_LANES[name] === lane);
}
