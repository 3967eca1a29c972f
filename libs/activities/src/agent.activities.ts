import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { EffectLedger } from '@agentrun/persistence';
import type { AgentActivities, ToolCall, ToolResult } from '@agentrun/workflows';
import { BadArguments, type Tool } from './tools';
import { Workspace } from './workspace';

export interface AgentActivityDeps {
  workspaceRoot: string;
  effects: EffectLedger;
  /** The tools this worker's lane serves; a call for any other tool is bad arguments. */
  tools: Tool[];
}

function stepOf(key: string): number {
  const parts = key.split(':');
  const step = Number(parts[parts.length - 2]);
  return Number.isInteger(step) ? step : 0;
}

export function createAgentActivities(deps: AgentActivityDeps): AgentActivities {
  const byName = new Map(deps.tools.map((t) => [t.name, t]));
  return {
    async prepareWorkspace({ org, run_id, goal }) {
      const workspace = new Workspace(deps.workspaceRoot, org, run_id);
      await workspace.write('goal.md', `# Goal\n\n${goal}\n`);
    },

    /**
     * Keyed and resumable. The ledger row is written last, so an attempt that dies half-way leaves
     * no row and the retry redoes the work; an attempt whose completion was lost after the effect
     * finds the row and returns it with `duplicate: true`.
     */
    async runTool(call: ToolCall): Promise<ToolResult> {
      const info = Context.current().info;
      const tool = byName.get(call.tool);
      if (!tool) {
        throw ApplicationFailure.nonRetryable(`tool '${call.tool}' is not served on task queue '${info.taskQueue}'`, 'BadArguments');
      }
      const recorded = await deps.effects.find<ToolResult>(call.key);
      if (recorded) return { ...recorded.result, duplicate: true };
      const workspace = new Workspace(deps.workspaceRoot, call.org, call.run_id);
      let output: string;
      try {
        output = await tool.run(call.args, {
          workspace,
          step: stepOf(call.key),
          heartbeat: (progress) => Context.current().heartbeat(progress),
        });
      } catch (err) {
        if (err instanceof BadArguments) throw ApplicationFailure.nonRetryable(err.message, 'BadArguments');
        throw err;
      }
      const result: ToolResult = { key: call.key, tool: call.tool, output, attempt: info.attempt, lane: info.taskQueue, duplicate: false };
      const stored = await deps.effects.record(call.key, `tool:${call.tool}`, result, info.attempt);
      return stored.duplicate ? { ...stored.result, duplicate: true } : stored.result;
    },
  };
}
