import { Type, type Static, type TObject, type TSchema } from '@sinclair/typebox';
import { type AgentPolicy, type RunKind, type Tier } from './commands';
import { ORG_PATTERN, RUN_ID_PATTERN } from './names';
import { Embedded, StringEnum } from './schema';
import { AGENT_STATUSES, CASE_ERROR_TYPES, CASE_STATUSES, EVAL_STATUSES, RUN_STATUSES, type RunStatus } from './statuses';

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
  'workspace_moved',
  'budget_exhausted',
  'budget_raised',
] as const;
export type RunEventType = (typeof RUN_EVENT_TYPES)[number];

export function isRunEventType(type: string): type is RunEventType {
  return (RUN_EVENT_TYPES as readonly string[]).includes(type);
}

/** One message of an `llm` run's conversation, as `step_completed` carries it (`messages`). */
export const CONVERSATION_MESSAGE_SCHEMA = Type.Object({
  role: StringEnum(['system', 'user', 'assistant', 'tool'] as const),
  content: Type.Union([Type.String({ maxLength: 8_000 }), Type.Null()]),
  /** An assistant's tool calls: each call's id, tool and arguments (a JSON text, as the model wrote it). */
  tool_calls: Type.Optional(
    Type.Array(Type.Object({ id: Type.String(), type: Type.Literal('function'), function: Type.Object({ name: Type.String(), arguments: Type.String({ maxLength: 8_000 }) }) })),
  ),
  /** A tool result's call id. */
  tool_call_id: Type.Optional(Type.String()),
  /** A text was longer than 8,000 characters and is cut there. */
  truncated: Type.Optional(Type.Literal(true)),
});
export type ConversationMessage = Static<typeof CONVERSATION_MESSAGE_SCHEMA>;

/** One model call's tokens and cost, as `step_completed` reports it (`usage`). */
export const MODEL_CALL_USAGE_SCHEMA = Type.Object({
  /** The model the call was priced as: the requested model's name. */
  model: Type.String(),
  prompt_tokens: Type.Integer({ minimum: 0 }),
  completion_tokens: Type.Integer({ minimum: 0 }),
  /** US dollars, from the price table in configuration (`AGENTRUN_MODEL_PRICES`); 0 when the model has no price. */
  cost_usd: Type.Number({ minimum: 0 }),
  /** False when the price table has no price for the model (nor a `*` entry). */
  priced: Type.Boolean(),
  /** True when the server reported no usage and the tokens were estimated from the texts (4 characters a token). */
  estimated: Type.Optional(Type.Boolean()),
});
export type ModelCallUsage = Static<typeof MODEL_CALL_USAGE_SCHEMA>;

/** A run's model calls added up, as its state carries them (`usage`). */
export const RUN_USAGE_SCHEMA = Type.Object({
  calls: Type.Integer({ minimum: 0 }),
  prompt_tokens: Type.Integer({ minimum: 0 }),
  completion_tokens: Type.Integer({ minimum: 0 }),
  cost_usd: Type.Number({ minimum: 0 }),
  /** Calls whose tokens were estimated (the server reported none). */
  estimated_calls: Type.Integer({ minimum: 0 }),
});
export type RunUsage = Static<typeof RUN_USAGE_SCHEMA>;

/** The whole state of an agent run, carried by every agent event as `payload.state`. */
export const AGENT_STATE_SCHEMA = Type.Object(
  {
    status: StringEnum(AGENT_STATUSES),
    goal: Type.String(),
    step: Type.Integer({ minimum: 0 }),
    max_steps: Type.Integer({ minimum: 1 }),
    // The wire takes any string here so a policy or tier added later does not dead-letter older readers.
    policy: Type.Unsafe<AgentPolicy>({ type: 'string' }),
    tier: Type.Unsafe<Tier>({ type: 'string' }),
    owner: Type.Optional(Type.String()),
    reason: Type.Optional(Type.String()),
    message: Type.Optional(Type.String()),
    parent_run_id: Type.Optional(Type.String()),
    /** For a fork: the snapshot of `parent_run_id` it started from. */
    forked_from_snapshot: Type.Optional(Type.String()),
    /** The current execution's history length, and the length at which it continues as new. */
    history_length: Type.Optional(Type.Integer({ minimum: 0 })),
    history_max_events: Type.Optional(Type.Integer({ minimum: 1 })),
    /** The workspace host holding the run's workspace (host-pinned workspaces); absent on a shared volume. */
    workspace_host: Type.Optional(Type.String()),
    /** The run's model calls so far (this run's own: a fork's reused replies are its parent's). Absent before its first call. */
    usage: Type.Optional(RUN_USAGE_SCHEMA),
    /** The run's spending limit, as started or last raised (`agent.raise_budget`). */
    budget: Type.Optional(Type.Object({ max_tokens: Type.Optional(Type.Integer({ minimum: 1 })), max_cost_usd: Type.Optional(Type.Number({ exclusiveMinimum: 0 })) })),
    /**
     * An `llm` run's answer, once it ended `done`: the read model (`GET /runs/{id}`, `GET /runs`) and the
     * run-state topic keep it from the `run_finished` event (the events' own `state` does not carry it).
     */
    answer: Type.Optional(Type.String({ maxLength: 4_000 })),
  },
  { $id: 'https://agentrun.dev/schemas/agent-state.v1.json', title: 'AgentRunState' },
);
export type AgentRunState = Static<typeof AGENT_STATE_SCHEMA>;


/** One case of an eval run as its state shows it. */
export const CASE_VIEW_SCHEMA = Type.Object({
  status: StringEnum(CASE_STATUSES),
  score: Type.Optional(Type.Number()),
  attempts: Type.Optional(Type.Integer({ minimum: 1 })),
  error_type: Type.Optional(StringEnum(CASE_ERROR_TYPES)),
});
export type CaseView = Static<typeof CASE_VIEW_SCHEMA>;

/** One scorer's verdict on one case. */
export const CASE_SCORE_SCHEMA = Type.Object({
  scorer: Type.String(),
  value: Type.Number({ minimum: 0, maximum: 1 }),
  explanation: Type.String({ maxLength: 2_000 }),
});
export type CaseScore = Static<typeof CASE_SCORE_SCHEMA>;

/** A case's result as `case_finished` carries it; texts are cut to fit an event (`truncated` says so). */
export const CASE_RESULT_SCHEMA = Type.Object({
  /** The input as text (chat turns as `role: content` lines). */
  input: Type.String({ maxLength: 4_000 }),
  target: Type.Array(Type.String({ maxLength: 1_000 })),
  output: Type.Union([Type.String({ maxLength: 8_000 }), Type.Null()]),
  scores: Type.Array(CASE_SCORE_SCHEMA),
  /** The case's model calls (the solver's and a judge's): tokens, and their cost at the configured prices when the worker has them. */
  usage: Type.Optional(Type.Object({ prompt_tokens: Type.Integer({ minimum: 0 }), completion_tokens: Type.Integer({ minimum: 0 }), cost_usd: Type.Optional(Type.Number({ minimum: 0 })) })),
  duration_ms: Type.Integer({ minimum: 0 }),
  /** What went wrong, for a case that ended with an error type. */
  error: Type.Optional(Type.String({ maxLength: 2_000 })),
  truncated: Type.Optional(Type.Boolean()),
});
export type CaseResult = Static<typeof CASE_RESULT_SCHEMA>;

/** The whole state of an eval run, carried by every eval event as `payload.state`. */
export const EVAL_STATE_SCHEMA = Type.Object(
  {
    status: StringEnum(EVAL_STATUSES),
    model: Type.String(),
    suite: Type.String(),
    /** The dataset's content hash and the solver, for runs over a real dataset. */
    dataset_id: Type.Optional(Type.String()),
    solver: Type.Optional(Type.String()),
    total: Type.Integer({ minimum: 0 }),
    done: Type.Integer({ minimum: 0 }),
    counts: Type.Object({ ok: Type.Integer({ minimum: 0 }), failed: Type.Integer({ minimum: 0 }), ungraded: Type.Integer({ minimum: 0 }) }),
    /** Mean over graded cases (ok and failed); ungraded cases are left out. */
    score: Type.Union([Type.Number(), Type.Null()]),
    cases: Type.Record(Type.String(), CASE_VIEW_SCHEMA),
    reviewers: Type.Array(Type.String()),
    approved_by: Type.Optional(Type.String()),
    parent_run_id: Type.Optional(Type.String()),
    reason: Type.Optional(Type.String()),
    message: Type.Optional(Type.String()),
    /** The eval's limits (`eval.start` `budget`, raised by `eval.raise_budget`): each case's worst case is reserved against them. */
    budget: Type.Optional(Type.Object({ max_tokens: Type.Optional(Type.Integer({ minimum: 1 })), max_cost_usd: Type.Optional(Type.Number({ exclusiveMinimum: 0 })) })),
    /** Its cases' model calls added up (tokens and cost). */
    usage: Type.Optional(RUN_USAGE_SCHEMA),
  },
  { $id: 'https://agentrun.dev/schemas/eval-state.v1.json', title: 'EvalRunState' },
);
export type EvalRunState = Static<typeof EVAL_STATE_SCHEMA>;

export const CAPTURE_STATUSES = ['ok', 'partial', 'failed', 'skipped'] as const;
export type CaptureStatus = (typeof CAPTURE_STATUSES)[number];

/**
 * One manifest row of a run's snapshot series. A row is usable (gradable, forkable) when it has a
 * `bundle_object_url`; `capture_status` is provenance, not a gate: `partial` means the archive
 * landed but the trajectory or env read degraded.
 */
export const SNAPSHOT_ROW_SCHEMA = Type.Object(
  {
    snapshot_id: Type.String(),
    /** 1-based; only on rows taken at a turn boundary. */
    turn: Type.Optional(Type.Integer({ minimum: 1 })),
    /** The workspace artifact and its version (the capture ordinal within the run). */
    id: Type.Optional(Type.String()),
    version: Type.Optional(Type.Integer()),
    bundle_object_url: Type.Optional(Type.String()),
    /** The archive's size in bytes, when it landed. */
    bytes: Type.Optional(Type.Integer({ minimum: 0 })),
    source_agent_name: Type.String(),
    source_context_id: Type.String(),
    elapsed_s: Type.Number(),
    captured_at_utc: Type.String(),
    is_final: Type.Boolean(),
    capture_status: StringEnum(CAPTURE_STATUSES),
    capture_reason: Type.Optional(Type.String()),
    /**
     * The trajectory object this capture wrote. A row with `trajectory_last_seq` points at its segment:
     * the run's events `trajectory_first_seq`..`trajectory_last_seq`, one JSON per line (the events after
     * the previous segment; a capture with no new events names the previous segment again). A row
     * without it (written before segments) points at the whole trajectory up to the capture.
     */
    trajectory_s3_uri: Type.Optional(Type.String()),
    /** The first run-event seq in this capture's trajectory segment. */
    trajectory_first_seq: Type.Optional(Type.Integer({ minimum: 0 })),
    /** The last run-event seq the capture saw (contiguous from 1): its trajectory is events 1..this. */
    trajectory_last_seq: Type.Optional(Type.Integer({ minimum: 0 })),
    /** The agent's state a fork starts from (step, goal, context, recorded effects), and its step. */
    env_universe_id: Type.Optional(Type.String()),
    env_universe_version: Type.Optional(Type.Integer()),
    /** The run's step when the capture began. */
    step: Type.Integer({ minimum: 0 }),
  },
  { $id: 'https://agentrun.dev/schemas/snapshot-row.v1.json', title: 'SnapshotRow' },
);
export type SnapshotRow = Static<typeof SNAPSHOT_ROW_SCHEMA>;

/** Where a capture's objects live in the object store: one prefix per snapshot, so no capture overwrites another. */
export function snapshotObjectKeys(org: string, runId: string, snapshotId: string): { archive: string; state: string; trajectory: string } {
  const prefix = `${org}/${runId}/snapshots/${snapshotId}`;
  return { archive: `${prefix}/workspace.tar.gz`, state: `${prefix}/state.json`, trajectory: `${prefix}/trajectory.jsonl` };
}

/**
 * Where the trajectory segment ending at run-event seq `lastSeq` lives: in the run's own folder, owned
 * by no snapshot, so a later capture's trajectory never depends on an earlier snapshot's objects. The
 * seq in the name is what a reader walks back by (see `trajectory_last_seq`).
 */
export function trajectorySegmentKey(org: string, runId: string, lastSeq: number): string {
  return `${org}/${runId}/trajectory/to-${String(lastSeq).padStart(12, '0')}.jsonl`;
}

/** Set when a command caused the event, so a client can match its command to what it did. */
const CommandId = () => Type.Optional(Type.String({ description: 'the command that caused the event' }));

/**
 * What each event type carries besides `payload.state`, built from what the workflows and
 * activities emit. Fields are never removed from a type; new ones are optional.
 */
export const RUN_EVENT_FIELDS = {
  run_started: Type.Object({
    /** A fork names its source: the run, the snapshot and the step it resumes at. */
    forked_from: Type.Optional(Type.Object({ run_id: Type.String(), snapshot_id: Type.String(), step: Type.Integer({ minimum: 0 }) })),
    /** What a fork restored into its workspace. */
    restored: Type.Optional(Type.Object({ files: Type.Integer({ minimum: 0 }), bytes: Type.Integer({ minimum: 0 }) })),
  }),
  step_completed: Type.Object({
    step: Type.Integer({ minimum: 0 }),
    kind: StringEnum(['tool', 'llm', 'research'] as const),
    /** The tool call, for a `tool` step: this is where a tool call is reported (not `tool_called`). */
    tool: Type.Optional(Type.String()),
    lane: Type.Optional(Type.String()),
    resumed_from_tick: Type.Optional(Type.Integer({ minimum: 1 })),
    /** Where the whole output is, when it was too large for the event (`output` is a preview). */
    output_ref: Type.Optional(Type.String()),
    attempt: Type.Integer({ minimum: 1 }),
    /** True when served from the effect ledger: the effect had already happened. */
    duplicate: Type.Boolean(),
    output: Type.String({ maxLength: 2_000 }),
    /** A model call's tokens and cost (`llm` steps, and `research` steps: the child's call); absent on a reply a fork reused from its parent. */
    usage: Type.Optional(MODEL_CALL_USAGE_SCHEMA),
    /**
     * An `llm` run's conversation messages added since the previous step said (at a run's or a fork's
     * first step, the system prompt and the goal too): the conversation is these, in seq order.
     */
    messages: Type.Optional(Type.Array(CONVERSATION_MESSAGE_SCHEMA)),
  }),
  tool_called: Type.Object(
    { tool: Type.Optional(Type.String()), lane: Type.Optional(Type.String()) },
    { description: 'Reserved: declared in version 1 and never emitted; a tool call is reported by `step_completed` (`tool`, `lane`).' },
  ),
  child_started: Type.Object({ step: Type.Integer({ minimum: 0 }), child_workflow_id: Type.String(), question: Type.String() }),
  status_changed: Type.Object({
    command_id: CommandId(),
    /** Who approved an eval run (the move to `published`). */
    reviewer: Type.Optional(Type.String()),
  }),
  context_injected: Type.Object({ command_id: Type.String(), text: Type.String() }),
  goal_changed: Type.Object({ command_id: Type.String(), previous_goal: Type.String() }),
  compensated: Type.Object({ name: Type.String() }),
  snapshot_captured: Type.Object({ snapshot: Embedded(SNAPSHOT_ROW_SCHEMA) }),
  case_finished: Type.Object({
    case_id: Type.String(),
    status: StringEnum(CASE_STATUSES),
    score: Type.Optional(Type.Number()),
    attempts: Type.Optional(Type.Integer({ minimum: 1 })),
    error_type: Type.Optional(StringEnum(CASE_ERROR_TYPES)),
    /** Real solvers (not `synthetic`): what the case was, what came out and how it was scored. */
    result: Type.Optional(CASE_RESULT_SCHEMA),
  }),
  run_finished: Type.Object({
    /** The `llm` policy's final answer, when it gave one. */
    answer: Type.Optional(Type.String({ maxLength: 4_000 })),
  }),
  workspace_moved: Type.Object({
    /** The host that stopped answering, and the host that holds the workspace now. */
    from: Type.String(),
    to: Type.String(),
    /** The snapshot the workspace was restored from; absent when there was none (a fresh workspace). */
    snapshot_id: Type.Optional(Type.String()),
    /** Tool steps after that point redone on the new host from their recorded effects (none billed again). */
    steps_replayed: Type.Integer({ minimum: 0 }),
  }),
  budget_exhausted: Type.Object({
    /** The step whose model call did not fit; it is made when the run resumes. An eval: its cases finished so far. */
    step: Type.Integer({ minimum: 0 }),
    /** An eval: the case whose worst case did not fit; it and the cases after it wait. */
    case_id: Type.Optional(Type.String()),
    /** Whose limit it was: the run's own (`budget`) or its org's monthly budget. */
    scope: StringEnum(['run', 'org'] as const),
    /** `tokens` or `usd`: which limit the call's worst case would pass. */
    limit: StringEnum(['tokens', 'usd'] as const),
    /** The limit, what is spent (settled calls) and reserved (calls in flight) against it, and what the call needed (its worst case). */
    max: Type.Number({ minimum: 0 }),
    spent: Type.Number({ minimum: 0 }),
    reserved: Type.Number({ minimum: 0 }),
    needed: Type.Number({ minimum: 0 }),
    /** `max - spent - reserved`, never below 0. */
    left: Type.Number({ minimum: 0 }),
  }),
  budget_raised: Type.Object({
    command_id: Type.String(),
    /** The limits before; the new ones are in `state.budget`. */
    previous: Type.Object({ max_tokens: Type.Optional(Type.Integer({ minimum: 1 })), max_cost_usd: Type.Optional(Type.Number()) }),
  }),
} satisfies Record<RunEventType, TObject>;

/** The fields an event type adds to its payload; whoever emits it attaches the run's state. */
export type RunEventFieldsOf<T extends RunEventType> = Static<(typeof RUN_EVENT_FIELDS)[T]>;

/** Why a model call's worst case did not fit a budget: whose limit, which one, and the figures (`budget_exhausted` without its step). */
export type BudgetShortfall = Omit<RunEventFieldsOf<'budget_exhausted'>, 'step'>;

/** Which kinds of run publish each event type. */
export const RUN_EVENT_KINDS = {
  run_started: ['agent', 'eval'],
  step_completed: ['agent'],
  tool_called: ['agent'],
  child_started: ['agent'],
  status_changed: ['agent', 'eval'],
  context_injected: ['agent'],
  goal_changed: ['agent'],
  compensated: ['agent'],
  snapshot_captured: ['agent'],
  case_finished: ['eval'],
  run_finished: ['agent', 'eval'],
  workspace_moved: ['agent'],
  budget_exhausted: ['agent', 'eval'],
  budget_raised: ['agent', 'eval'],
} as const satisfies Record<RunEventType, readonly RunKind[]>;

/** One line per event type, for the documents generated from this catalogue. */
export const RUN_EVENT_DESCRIPTIONS: Record<RunEventType, string> = {
  run_started: 'The run began (a fork also names its source and what it restored).',
  step_completed: 'An agent step finished: a tool call, a model call or a research child.',
  tool_called: 'Reserved, never emitted: tool calls are reported by `step_completed`. Kept so the type stays known.',
  child_started: 'A research child workflow started for this step.',
  status_changed: 'The status moved (pause, resume, cancel requested, awaiting review, approved).',
  context_injected: 'Text was added to the agent context by `agent.inject_context`.',
  goal_changed: 'The goal changed by `agent.change_goal`; the new goal is in `state.goal`.',
  compensated: 'A held resource was released while the run was being undone.',
  snapshot_captured: 'One snapshot manifest row landed (or was skipped), in capture order.',
  case_finished: 'One eval case finished: ok, failed or ungraded.',
  run_finished: 'The run reached its last status for now (done, failed, cancelled, or an eval awaiting review or published).',
  workspace_moved: "The run's workspace host stopped answering: the workspace was restored on another host and the run went on there.",
  budget_exhausted: "A model call's worst case did not fit the run's or its org's budget: the run is `paused` with `reason: budget_exhausted` until `agent.raise_budget` (or `agent.resume`, after the org's budget was raised).",
  budget_raised: 'The run\'s budget was raised by `agent.raise_budget`; the new limits are in `state.budget`, and a run paused on its budget goes on.',
};

type StateOf<K extends RunKind> = K extends 'agent' ? AgentRunState : EvalRunState;
type TypesOf<K extends RunKind> = { [T in RunEventType]: K extends (typeof RUN_EVENT_KINDS)[T][number] ? T : never }[RunEventType];

interface RunEventOfKind<K extends RunKind, T extends RunEventType> {
  run_id: string;
  org: string;
  kind: K;
  /** 1, 2, 3, ... per run, with no gap. */
  seq: number;
  type: T;
  ts: string;
  payload: Static<(typeof RUN_EVENT_FIELDS)[T]> & { state: StateOf<K> };
}

/**
 * A run event of a known type: a union discriminated on `type` (and on `kind`, which fixes the
 * state's shape). What the topic carries is wider, see RunEventEnvelope: a reader ignores types it
 * does not know rather than refusing them.
 */
export type RunEvent = { [K in RunKind]: { [T in TypesOf<K>]: RunEventOfKind<K, T> }[TypesOf<K>] }[RunKind];
export type RunEventOf<T extends RunEventType> = Extract<RunEvent, { type: T }>;
export type RunEventPayloadOf<T extends RunEventType> = RunEventOf<T>['payload'];

/** A state as every reader may rely on: a known status, the rest open. */
export interface RunState {
  status: RunStatus;
  [field: string]: unknown;
}

/**
 * Either kind's state with every field but `status` optional: what a reader may rely on before it
 * has looked at the run's kind (the read model's `state` column, a dashboard row).
 */
export type RunStateView = { status: RunStatus } & Partial<Omit<AgentRunState, 'status'>> & Partial<Omit<EvalRunState, 'status'>>;

/**
 * The envelope every event on the topic satisfies. It is deliberately open (any `type`, any extra
 * payload field), so a consumer built against this version reads events of later versions.
 */
export const RUN_EVENT_SCHEMA = Type.Object(
  {
    run_id: Type.String({ pattern: RUN_ID_PATTERN }),
    org: Type.String({ pattern: ORG_PATTERN }),
    kind: StringEnum(['agent', 'eval'] as const),
    seq: Type.Integer({ minimum: 1, maximum: 2_147_483_647 }),
    type: Type.Unsafe<RunEventType | (string & {})>({ type: 'string', pattern: '^[a-z][a-z_]{0,63}$' }),
    ts: Type.String({ format: 'date-time' }),
    payload: Type.Object({ state: Type.Optional(Type.Object({ status: StringEnum(RUN_STATUSES) })) }),
  },
  { $id: 'https://agentrun.dev/schemas/run-event.v1.json', title: 'RunEvent' },
);
export type RunEventEnvelope = Omit<Static<typeof RUN_EVENT_SCHEMA>, 'payload'> & {
  payload: { state?: RunState; [field: string]: unknown };
};

/** The payload schema of each known type (its fields and the state of the kinds that publish it). */
export const RUN_EVENT_PAYLOAD_SCHEMAS = {} as Record<RunEventType, TSchema>;
for (const type of RUN_EVENT_TYPES) {
  const kinds: readonly RunKind[] = RUN_EVENT_KINDS[type];
  const states = kinds.map((kind) => Embedded(kind === 'agent' ? AGENT_STATE_SCHEMA : EVAL_STATE_SCHEMA));
  const fields: TObject = RUN_EVENT_FIELDS[type];
  RUN_EVENT_PAYLOAD_SCHEMAS[type] = Type.Object(
    { ...fields.properties, state: states.length === 1 ? states[0] : Type.Union(states) },
    { title: `${type} payload`, ...(fields.description ? { description: fields.description } : {}) },
  );
}

/** True when the event is of a known type; its payload is then typed by that type. */
export function isKnownRunEvent(event: RunEventEnvelope): event is RunEventEnvelope & RunEvent {
  return isRunEventType(event.type);
}
