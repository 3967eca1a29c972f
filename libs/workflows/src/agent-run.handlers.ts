import { setHandler, workflowInfo } from '@temporalio/workflow';
import type { AgentLoopState } from './agent-run.state';
import type { RunLifecycle } from './agent-run.lifecycle';
import { cancelRunSignal, changeGoalUpdate, injectContextSignal, pauseSignal, resumeSignal, statusQuery } from './definitions';
import type { Outbox } from './outbox';
import type { SeriesSlot } from './workspace-hosts';

/** Goals are bounded in code points, as the schema at the boundary counts them (an emoji is one, not two UTF-16 units). */
const MAX_GOAL_CHARS = 500;

/**
 * Refuses a goal change before it is accepted: a refused Update never reaches history. A goal a
 * start accepts must not be refused here.
 */
export function validateGoalChange(run: Pick<AgentLoopState, 'settling' | 'status'>, { command_id, goal }: { command_id: string; goal: string }): void {
  if (typeof goal !== 'string' || goal.trim() === '') throw new Error('goal must not be empty');
  if ([...goal].length > MAX_GOAL_CHARS) throw new Error(`goal must be at most ${MAX_GOAL_CHARS} characters`);
  if (!command_id) throw new Error('command_id is required');
  if (run.settling()) throw new Error(`the run is ${run.status}; its goal can no longer change`);
}

/**
 * The run's Signals, Update and Query. Each control is applied once per command id and ignored once
 * the run is settling; the handlers change state and publish, the loop acts on it at its next turn.
 */
export function registerAgentRunHandlers(run: AgentLoopState, lifecycle: RunLifecycle, outbox: Outbox, slot: SeriesSlot): void {
  setHandler(pauseSignal, ({ command_id }) => {
    if (!run.firstTime(command_id) || run.paused || run.settling() || run.status !== 'running') return;
    lifecycle.pause(command_id);
  });
  setHandler(resumeSignal, ({ command_id }) => {
    if (!run.firstTime(command_id) || !run.paused || run.settling()) return;
    lifecycle.resume(command_id);
  });
  setHandler(cancelRunSignal, ({ command_id }) => {
    if (!run.firstTime(command_id) || run.settling()) return;
    lifecycle.requestCancel(command_id);
  });
  setHandler(injectContextSignal, ({ command_id, text }) => {
    if (!run.firstTime(command_id) || run.settling()) return;
    run.context = `${run.context}\n[injected: ${text}]`;
    outbox.emit('context_injected', { command_id, text });
  });
  setHandler(
    changeGoalUpdate,
    ({ command_id, goal }) => {
      if (!run.firstTime(command_id)) return `ignored: command ${command_id} already applied`;
      const previous = run.goal;
      run.goal = goal;
      run.context = `${run.context}\n[goal changed: ${goal}]`;
      outbox.emit('goal_changed', { command_id, previous_goal: previous });
      return `goal changed from '${previous}' to '${goal}'`;
    },
    { validator: (change) => validateGoalChange(run, change) },
  );
  setHandler(statusQuery, () => {
    const info = workflowInfo();
    return run.statusView(info, outbox.seq(), slot.series?.rows());
  });
}
