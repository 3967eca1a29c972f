import type { AgentPolicy, RunKind, Tier } from './commands';
import { ORG_PATTERN, RUN_ID_PATTERN } from './names';
import { AGENT_STATUSES, RUN_STATUSES, type AgentStatus, type RunStatus } from './statuses';

/** Event types are past tense; consumers ignore types they do not know. */
export const RUN_EVENT_TYPES = [
  'run_started',
  'step_completed',
  'tool_called',
  'child_started',
  'status_changed',
  'context_injected',
  'goal_changed',
  'compensated',
  'snapshot_captured',
  'case_finished',
  'run_finished',
] as const;
export type RunEventType = (typeof RUN_EVENT_TYPES)[number];

/** The whole per-kind state that an event carrying `payload.state` shows. */
export type AgentRunState = {
  status: AgentStatus;
  goal: string;
  step: number;
  max_steps: number;
  policy: AgentPolicy;
  tier: Tier;
  owner?: string;
  reason?: string;
  message?: string;
  parent_run_id?: string;
  /** For a fork: the snapshot of `parent_run_id` it started from. */
  forked_from_snapshot?: string;
  /** The current execution's history length, and the length at which it continues as new. */
  history_length?: number;
  history_max_events?: number;
};

export const CAPTURE_STATUSES = ['ok', 'partial', 'failed', 'skipped'] as const;
export type CaptureStatus = (typeof CAPTURE_STATUSES)[number];

/**
 * One manifest row of a run's snapshot series, with the reference's field names. A row is usable
 * (gradable, forkable) when it has a `bundle_object_url`; `capture_status` is provenance, not a gate:
 * `partial` means the archive landed but the trajectory or env read degraded.
 */
export interface SnapshotRow {
  snapshot_id: string;
  /** 1-based; only on rows taken at a turn boundary. */
  turn?: number;
  /** The workspace artifact and its version (the capture ordinal within the run). */
  id?: string;
  version?: number;
  bundle_object_url?: string;
  /** The archive's size in bytes, when it landed. */
  bytes?: number;
  source_agent_name: string;
  source_context_id: string;
  elapsed_s: number;
  captured_at_utc: string;
  is_final: boolean;
  capture_status: CaptureStatus;
  capture_reason?: string;
  /** The run's events up to the capture, one JSON per line. */
  trajectory_s3_uri?: string;
  /** The agent's state a fork starts from (step, goal, context, recorded effects), and its step. */
  env_universe_id?: string;
  env_universe_version?: number;
  /** The run's step when the capture began. */
  step: number;
}

/** Where a capture's objects live in the object store: one prefix per snapshot, so no capture overwrites another. */
export function snapshotObjectKeys(org: string, runId: string, snapshotId: string): { archive: string; state: string; trajectory: string } {
  const prefix = `${org}/${runId}/snapshots/${snapshotId}`;
  return { archive: `${prefix}/workspace.tar.gz`, state: `${prefix}/state.json`, trajectory: `${prefix}/trajectory.jsonl` };
}

export interface RunState {
  status: RunStatus;
  [field: string]: unknown;
}

export interface RunEvent<S extends RunState = RunState> {
  run_id: string;
  org: string;
  kind: RunKind;
  seq: number;
  type: RunEventType | string;
  ts: string;
  payload: { state?: S; [field: string]: unknown };
}

export const AGENT_STATE_SCHEMA = {
  $id: 'https://agentrun.dev/schemas/agent-state.v1.json',
  title: 'AgentRunState',
  type: 'object',
  required: ['status', 'goal', 'step', 'max_steps', 'policy', 'tier'],
  properties: {
    status: { enum: AGENT_STATUSES },
    goal: { type: 'string' },
    step: { type: 'integer', minimum: 0 },
    max_steps: { type: 'integer', minimum: 1 },
    policy: { type: 'string' },
    tier: { type: 'string' },
    owner: { type: 'string' },
    reason: { type: 'string' },
    message: { type: 'string' },
    parent_run_id: { type: 'string' },
    forked_from_snapshot: { type: 'string' },
    history_length: { type: 'integer', minimum: 0 },
    history_max_events: { type: 'integer', minimum: 1 },
  },
} as const;

export const RUN_EVENT_SCHEMA = {
  $id: 'https://agentrun.dev/schemas/run-event.v1.json',
  title: 'RunEvent',
  type: 'object',
  required: ['run_id', 'org', 'kind', 'seq', 'type', 'ts', 'payload'],
  properties: {
    run_id: { type: 'string', pattern: RUN_ID_PATTERN },
    org: { type: 'string', pattern: ORG_PATTERN },
    kind: { enum: ['agent', 'eval'] },
    seq: { type: 'integer', minimum: 1, maximum: 2_147_483_647 },
    type: { type: 'string', pattern: '^[a-z][a-z_]{0,63}$' },
    ts: { type: 'string', format: 'date-time' },
    payload: {
      type: 'object',
      properties: {
        state: {
          type: 'object',
          required: ['status'],
          properties: { status: { enum: RUN_STATUSES } },
        },
      },
    },
  },
} as const;
