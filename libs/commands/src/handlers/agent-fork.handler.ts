import { workflowIdFor, type AgentStartPayload } from '@agentrun/contracts';
import { accepted, rejected } from '../decision';
import type { SnapshotLookupPort } from '../ports';
import type { CommandHandler } from './command-handler';
import type { RunStarter } from './run-starter';

type ShownState = Partial<Pick<AgentStartPayload, 'goal' | 'max_steps' | 'policy' | 'tier' | 'owner'>>;

/**
 * A new run from a snapshot of another run of the same org: its workspace restored, its state as of
 * the snapshot, the parent's recorded results reused. The manifest is the authority, so a parent that
 * Temporal has already forgotten can still be forked.
 */
export function agentForkHandler(snapshots: SnapshotLookupPort, starter: RunStarter): CommandHandler<'agent.fork'> {
  return async (command) => {
    const { org, run_id: runId, payload } = command;
    const from = payload.from_run_id;
    const kind = await snapshots.runKind(org, from);
    if (kind === undefined) return rejected('unknown_run', `org ${org} has no run '${from}'`);
    if (kind !== 'agent') return rejected('wrong_kind', `run '${from}' is not an agent run; only agent runs have snapshots`);
    const found = await snapshots.find(org, from, payload.snapshot_id);
    if (!found) return rejected('unknown_snapshot', `run '${from}' has no snapshot '${payload.snapshot_id}'`);
    const { row, state } = found;
    if (!row.bundle_object_url || !row.env_universe_id || !state) {
      const why = !row.bundle_object_url ? 'no workspace archive landed' : 'its state was not captured';
      const status = `${row.capture_status}${row.capture_reason ? `: ${row.capture_reason}` : ''}`;
      return rejected('snapshot_unusable', `snapshot '${row.snapshot_id}' of run '${from}' cannot be forked: ${why} (${status})`);
    }
    const shown = state as ShownState;
    const decision = await starter.startAgent(
      command.command_id,
      org,
      runId,
      {
        goal: payload.goal ?? shown.goal ?? 'forked run',
        ...(shown.max_steps ? { max_steps: shown.max_steps } : {}),
        ...(shown.policy ? { policy: shown.policy } : {}),
        ...(shown.tier ? { tier: shown.tier } : {}),
        ...(shown.owner ? { owner: shown.owner } : {}),
        ...(payload.snapshots ? { snapshots: payload.snapshots } : {}),
      },
      {
        input: { from_run_id: from, from_workflow_id: workflowIdFor(org, from), snapshot_id: row.snapshot_id, ...(payload.goal ? { goal: payload.goal } : {}) },
        step: row.step,
      },
    );
    return decision.outcome === 'accepted' ? accepted(`forked from snapshot '${row.snapshot_id}' of run '${from}' at step ${row.step}`) : decision;
  };
}
