import { Type, type Static } from '@sinclair/typebox';
import { RUN_KINDS } from './commands';
import type { RunState } from './events';
import { ORG_PATTERN, RUN_ID_PATTERN, workflowIdFor } from './names';
import { StringEnum } from './schema';
import { RUN_STATUSES } from './statuses';

/**
 * The latest state of one run, on the compacted topic `agentrun.run-state.v1` keyed `{org}/{run_id}`:
 * the projector publishes one after every commit, so a reader gets each run's current state from the
 * topic alone without replaying its events. `seq`, `type` and `ts` are those of the last event applied.
 */
export const RUN_STATE_RECORD_SCHEMA = Type.Object(
  {
    org: Type.String({ pattern: ORG_PATTERN }),
    run_id: Type.String({ pattern: RUN_ID_PATTERN }),
    kind: StringEnum(RUN_KINDS),
    seq: Type.Integer({ minimum: 1, maximum: 2_147_483_647 }),
    type: Type.String({ pattern: '^[a-z][a-z_]{0,63}$' }),
    status: StringEnum(RUN_STATUSES),
    ts: Type.String({ format: 'date-time' }),
    state: Type.Unsafe<RunState>(Type.Object({ status: StringEnum(RUN_STATUSES) })),
  },
  { $id: 'https://agentrun.dev/schemas/run-state.v1.json', title: 'RunStateRecord' },
);
export type RunStateRecord = Static<typeof RUN_STATE_RECORD_SCHEMA>;

/** The record's Kafka key: one per run, so compaction keeps only the newest. */
export function runStateKey(org: string, runId: string): string {
  return workflowIdFor(org, runId);
}
