import { ApplicationFailure } from '@temporalio/workflow';
import type { AgentRunInput, SnapshotSeriesConfig, ToolCall, WorkspacePlacement } from './agent-run.types';
import type { AgentLoopState } from './agent-run.state';
import { agentRunActivities, hostLost, hostWaitSecondsOf, toolOnHost, type AgentRunActivities, type WorkspaceMover } from './agent-run.steps';
import type { Outbox } from './outbox';
import type { SnapshotSeries } from './snapshot-series';

/** A run without a snapshot series, on a workspace host, captures a recovery point every this many steps. */
export const DEFAULT_RECOVERY_EVERY_STEPS = 10;
/** How many times a move is tried (each host it lands on may be lost in turn) before the run fails. */
const MAX_MOVES_IN_A_ROW = 3;

/** The recovery points of a run with no snapshot series: captures every N steps, no final one. */
export function recoveryConfig(input: AgentRunInput): SnapshotSeriesConfig {
  return {
    interval_seconds: 0,
    per_turn: false,
    at_end: false,
    timeout_seconds: 60,
    max_snapshots: 1_000_000,
    every_steps: input.recovery_every_steps ?? DEFAULT_RECOVERY_EVERY_STEPS,
  };
}

/** The run's snapshot series, which a workspace host may open after the run has started (recovery points). */
export interface SeriesSlot {
  series: SnapshotSeries | undefined;
}

/**
 * Host-pinned workspaces, as the workflow sees them. The host that prepares (or restores) a run's
 * workspace answers with its placement; from then on every workspace activity goes to that host's
 * queues. When the host stops answering (a schedule-to-start timeout on its queue), the workspace is
 * restored on whichever host takes it from the shared lane, from the run's newest usable snapshot (or
 * made anew when there is none), and the tool steps taken since that point are redone there from
 * their recorded effects, nothing billed again. On a shared volume (no placement) none of this runs.
 */
export class WorkspaceHosts implements WorkspaceMover {
  constructor(
    private readonly input: AgentRunInput,
    private readonly run: AgentLoopState,
    private readonly activities: AgentRunActivities,
    private readonly outbox: Outbox,
    private readonly slot: SeriesSlot,
    private readonly openRecovery: (lane: string) => SnapshotSeries | undefined,
  ) {}


  pinned(): boolean {
    return this.run.placement !== undefined;
  }

  /** The workspace is on this host now: its queues for every workspace activity, captures included. */
  adopt(placement: WorkspacePlacement | void): void {
    if (!placement) return;
    this.run.placement = placement;
    Object.assign(this.activities, agentRunActivities(this.input, this.run.timeouts, placement, (a, since) => this.outbox.carry(a, since)));
    if (this.slot.series) this.slot.series.useLane(placement.lanes.snapshots, hostWaitSecondsOf(this.run.timeouts));
    else this.slot.series = this.openRecovery(placement.lanes.snapshots);
  }

  took(step: number, call: ToolCall, lane: 'cpu' | 'gpu'): void {
    this.run.toolLog.push({ step, call, lane });
  }

  /** A snapshot landed: tool steps before it are in its archive and need no redoing. */
  landed(step: number): void {
    if (!this.pinned()) return;
    const keep = this.run.toolLog.filter((r) => r.step >= step);
    this.run.toolLog.splice(0, this.run.toolLog.length, ...keep);
  }

  async move(): Promise<void> {
    const { input, run } = this;
    const from = run.placement?.host ?? 'unknown';
    for (let tries = 1; ; tries++) {
      try {
        const latest = this.slot.series?.latestUsable();
        // A fork that has no usable snapshot of its own yet starts again from the one it was forked from.
        const source = latest ? { from_run_id: input.run_id, snapshot_id: latest.snapshot_id } : input.fork ? { from_run_id: input.fork.from_run_id, snapshot_id: input.fork.snapshot_id } : undefined;
        const placement = source
          ? (await this.activities.restorer.restoreSnapshot({ org: input.org, run_id: input.run_id, ...source })).placement
          : await this.activities.claim.prepareWorkspace({ org: input.org, run_id: input.run_id, goal: input.goal, ...(input.seed ? { seed: input.seed } : {}) });
        if (!placement) {
          throw ApplicationFailure.nonRetryable(
            `the workspace host '${from}' was lost and the host that took the workspace is not a workspace host (AGENTRUN_WORKSPACE_HOST_ID unset): mixed modes`,
            'WorkspaceHostLost',
          );
        }
        this.adopt(placement);
        const since = latest?.step ?? 0;
        const redo = run.toolLog.filter((r) => r.step >= since);
        for (const r of redo) await toolOnHost(this.activities, input, { ...r.call, replay: true }, r.lane);
        this.outbox.emit('workspace_moved', { from, to: placement.host, ...(source ? { snapshot_id: source.snapshot_id } : {}), steps_replayed: redo.length });
        return;
      } catch (err) {
        if (!hostLost(err) || tries >= MAX_MOVES_IN_A_ROW) throw err;
      }
    }
  }
}
