import { isToolName, toolFunctionSpec } from '@agentrun/contracts';
import type { ToolSpec } from './llm';

/** The tools a model may call, in the function-calling shape, as the contracts' tool catalogue declares them. */
export function toolSpecsFor(names: string[]): ToolSpec[] {
  return names.map((name) => {
    if (!isToolName(name)) throw new Error(`no tool named '${name}'`);
    return toolFunctionSpec(name);
  });
}
