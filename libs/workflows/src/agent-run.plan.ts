import { TOOL_LANES } from '@agentrun/contracts';
import type { Conversation } from './conversation';

export type Step =
  | { kind: 'llm'; prompt: string }
  | { kind: 'tool'; tool: string; lane: 'cpu' | 'gpu'; args: Record<string, string | number>; call_id?: string }
  | { kind: 'research'; question: string }
  | { kind: 'finish' };

export interface PlanState {
  step: number;
  max_steps: number;
  goal: string;
  context: string;
  research_every: number;
}

/**
 * The next step, as a pure function of state: it never calls a model, so replay always agrees.
 * Four phases per cycle: think (model), a CPU tool, a GPU tool, then research (a sub-agent, every
 * `research_every` cycles) or reflect (model).
 */
export function plan(state: PlanState): Step {
  if (state.step >= state.max_steps) return { kind: 'finish' };
  switch (state.step % 4) {
    case 0:
      return { kind: 'llm', prompt: `step ${state.step}: plan the next move toward: ${state.goal}` };
    case 1:
      return { kind: 'tool', tool: 'search', lane: 'cpu', args: { query: state.goal, step: state.step } };
    case 2:
      return { kind: 'tool', tool: 'embed', lane: 'gpu', args: { text: state.context.slice(-400) || state.goal, step: state.step } };
    default:
      return Math.floor(state.step / 4) % state.research_every === 0
        ? { kind: 'research', question: `what is still missing for: ${state.goal}` }
        : { kind: 'llm', prompt: `step ${state.step}: reflect on: ${state.context.slice(-200)}` };
  }
}

/**
 * Under the `llm` policy the model decides: run the tool calls it asked for, one per step, then ask
 * it again with their results; finish when it answers. Still a pure function of state.
 */
export function planLlm(state: { step: number; max_steps: number; conversation: Conversation }): Step {
  if (state.step >= state.max_steps) return { kind: 'finish' };
  const [call] = state.conversation.pending;
  if (call) return { kind: 'tool', tool: call.name, lane: TOOL_LANES[call.name], args: call.args, call_id: call.id };
  if (state.conversation.answer !== undefined) return { kind: 'finish' };
  return { kind: 'llm', prompt: '' };
}
