import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { COMMAND_ID_PATTERN, MAX_GOAL_CHARS, ORG_PATTERN, RUN_ID_PATTERN, SNAPSHOT_ID_PATTERN } from './names';
import { AnyObject, StringEnum } from './schema';

export const RUN_KINDS = ['agent', 'eval'] as const;
export type RunKind = (typeof RUN_KINDS)[number];

export const AGENT_POLICIES = ['scripted', 'llm'] as const;
export type AgentPolicy = (typeof AGENT_POLICIES)[number];
export const TIERS = ['enterprise', 'team', 'batch'] as const;
export type Tier = (typeof TIERS)[number];

export const DEFAULT_MAX_STEPS = 8;

const Goal = () => Type.String({ minLength: 1, maxLength: MAX_GOAL_CHARS, pattern: '\\S' });
const Name = () => Type.String({ minLength: 1, maxLength: 200 });
const Empty = () => Type.Object({}, { additionalProperties: false });

/**
 * A run's capture series. Its presence is the switch: absent means no snapshots. `interval_seconds`
 * is the gap between captures (0 or absent: no cadence); `per_turn` captures after each step, before
 * the next; `at_end` (default true) takes one final capture, exempt from `max_snapshots` (default 24,
 * interior captures only); `timeout_seconds` (default 300) bounds each capture, retries included.
 */
export const SNAPSHOT_SETTINGS_SCHEMA = Type.Object(
  {
    interval_seconds: Type.Optional(Type.Number({ minimum: 0, maximum: 86_400 })),
    per_turn: Type.Optional(Type.Boolean()),
    at_end: Type.Optional(Type.Boolean()),
    max_snapshots: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000 })),
    timeout_seconds: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 3_600 })),
  },
  { additionalProperties: false },
);
export type SnapshotSettings = Static<typeof SNAPSHOT_SETTINGS_SCHEMA>;

export const SNAPSHOT_DEFAULTS = { at_end: true, per_turn: false, timeout_seconds: 300, max_snapshots: 24 } as const;

/** Why a snapshot configuration can never capture, or undefined when it can. */
export function snapshotSettingsProblem(settings: SnapshotSettings): string | undefined {
  const ticks = (settings.interval_seconds ?? 0) > 0;
  if ((settings.at_end ?? SNAPSHOT_DEFAULTS.at_end) === false && !ticks && !settings.per_turn) {
    return `snapshots with at_end=false need a positive interval_seconds (got ${settings.interval_seconds ?? 'none'}) or per_turn=true; otherwise no capture ever runs`;
  }
  return undefined;
}

/**
 * A run's spending limit: tokens (prompt and completion together) and US dollars over all its model
 * calls. Either or both; a call whose worst case would pass one pauses the run (`budget_exhausted`).
 */
export const RUN_BUDGET_SCHEMA = Type.Object(
  {
    max_tokens: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000_000_000 })),
    max_cost_usd: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 1_000_000_000 })),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type RunBudget = Static<typeof RUN_BUDGET_SCHEMA>;

const AGENT_START_SCHEMA = Type.Object(
  {
    goal: Goal(),
    max_steps: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000 })),
    policy: Type.Optional(StringEnum(AGENT_POLICIES)),
    tier: Type.Optional(StringEnum(TIERS)),
    owner: Type.Optional(Name()),
    snapshots: Type.Optional(SNAPSHOT_SETTINGS_SCHEMA),
    budget: Type.Optional(RUN_BUDGET_SCHEMA),
    /** The model the run's model calls ask for, on the platform's model endpoint; absent: the endpoint's configured model. */
    model: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$' })),
  },
  { additionalProperties: false },
);
export type AgentStartPayload = Static<typeof AGENT_START_SCHEMA>;

export const EVAL_SOLVER_NAMES = ['generate', 'agent', 'synthetic'] as const;
export const EVAL_SCORER_NAMES = ['exact', 'includes', 'regex', 'numeric', 'choice', 'json', 'files', 'model_graded'] as const;

/** One case of an eval dataset, as its shape goes; the evals library checks what a schema cannot (ids unique, sizes). */
export const EVAL_CASE_SCHEMA = Type.Object(
  {
    id: Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$' }),
    input: Type.Union([
      Type.String({ minLength: 1 }),
      Type.Array(Type.Object({ role: StringEnum(['system', 'user', 'assistant'] as const), content: Type.String() }, { additionalProperties: false }), { minItems: 1, maxItems: 100 }),
    ]),
    target: Type.Union([Type.String(), Type.Array(Type.String({ minLength: 1 }), { minItems: 1, maxItems: 50 })]),
    metadata: Type.Optional(AnyObject()),
    files: Type.Optional(Type.Record(Type.String(), Type.String())),
  },
  { additionalProperties: false },
);

/** The cases of an eval: inline, an uploaded dataset by name or content hash, or a suite shipped in the repository. */
export const EVAL_DATASET_SCHEMA = Type.Union([
  Type.Object({ cases: Type.Array(EVAL_CASE_SCHEMA, { minItems: 1, maxItems: 500 }), name: Type.Optional(Name()) }, { additionalProperties: false }),
  Type.Object({ name: Name() }, { additionalProperties: false }),
  Type.Object({ id: Type.String({ pattern: '^[0-9a-f]{64}$' }) }, { additionalProperties: false }),
]);

const Text = (maxLength: number) => Type.String({ maxLength });
const Solver = <N extends string, P extends Parameters<typeof Type.Object>[0]>(name: N, options: P) =>
  Type.Object({ name: Type.Literal(name), ...options }, { additionalProperties: false });
/** A solver by name, or by name with its options. */
export const EVAL_SOLVER_SCHEMA = Type.Union([
  StringEnum(EVAL_SOLVER_NAMES),
  Solver('generate', { system_prompt: Type.Optional(Text(65_536)), temperature: Type.Optional(Type.Number({ minimum: 0, maximum: 2 })), max_tokens: Type.Optional(Type.Integer({ minimum: 1, maximum: 32_768 })) }),
  Solver('agent', { max_steps: Type.Optional(Type.Integer({ minimum: 1, maximum: 200 })), policy: Type.Optional(StringEnum(AGENT_POLICIES)) }),
  Solver('synthetic', { fail_fraction: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })) }),
]);
const FILE_CHECK_SCHEMA = Type.Object(
  { path: Type.String({ minLength: 1, maxLength: 1_024 }), exists: Type.Optional(Type.Boolean()), contains: Type.Optional(Text(65_536)), matches: Type.Optional(Text(4_096)) },
  { additionalProperties: false },
);
/** A scorer by name, or by name with its options (`regex` needs its `pattern`). */
export const EVAL_SCORER_SCHEMA = Type.Union([
  StringEnum(EVAL_SCORER_NAMES),
  Solver('exact', {}),
  Solver('includes', {}),
  Solver('choice', {}),
  Solver('regex', { pattern: Type.String({ minLength: 1, maxLength: 4_096 }), flags: Type.Optional(Type.String({ pattern: '^[imsuv]*$', maxLength: 5 })) }),
  Solver('numeric', { tolerance: Type.Optional(Type.Number({ minimum: 0 })) }),
  Solver('json', { schema: Type.Optional(AnyObject()) }),
  Solver('files', { checks: Type.Optional(Type.Array(FILE_CHECK_SCHEMA, { minItems: 1, maxItems: 200 })) }),
  Solver('model_graded', { rubric: Type.Optional(Text(65_536)), model: Type.Optional(Name()), endpoint: Type.Optional(Type.String({ pattern: '^[a-z0-9][a-z0-9_-]{0,62}$' })) }),
]);
const SYNTHETIC = { anyOf: [{ const: 'synthetic' }, { type: 'object', required: ['name'], properties: { name: { const: 'synthetic' } } }] };

const EVAL_START_SCHEMA = Type.Object(
  {
    /** The model under test. */
    model: Name(),
    /** A label for the run; with a dataset it defaults to the dataset's name. */
    suite: Type.Optional(Name()),
    case_ids: Type.Optional(Type.Array(Name(), { minItems: 1, maxItems: 500, uniqueItems: true })),
    /** Synthetic runs: this many made-up cases. With a dataset: its first this many cases. */
    cases: Type.Optional(Type.Integer({ minimum: 1, maximum: 500 })),
    /** The synthetic solver's chance of failing a case. */
    fail_fraction: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
    reviewers: Type.Optional(Type.Array(Name(), { maxItems: 50 })),
    dataset: Type.Optional(EVAL_DATASET_SCHEMA),
    /** `generate`, `agent` or `synthetic` (the default without a dataset), or `{"name": ..., ...options}`. */
    solver: Type.Optional(EVAL_SOLVER_SCHEMA),
    scorers: Type.Optional(Type.Array(EVAL_SCORER_SCHEMA, { minItems: 1, maxItems: 10 })),
    /** The `agent` solver: each case's run captures this series (its final snapshot is always taken: the scorers read it). */
    snapshots: Type.Optional(SNAPSHOT_SETTINGS_SCHEMA),
    /** A model endpoint the workers are configured with (`AGENTRUN_MODEL_ENDPOINTS`); absent: `default`. */
    model_endpoint: Type.Optional(Type.String({ pattern: '^[a-z0-9][a-z0-9_-]{0,62}$' })),
    /** The eval's limits: each case's worst case (its model calls') is reserved against them before it runs. */
    budget: Type.Optional(RUN_BUDGET_SCHEMA),
  },
  {
    additionalProperties: false,
    // Cases by a list of ids or a count (synthetic: with a suite label), or a dataset; ids and a count are two answers to one question.
    anyOf: [{ required: ['case_ids', 'suite'] }, { required: ['cases', 'suite'] }, { required: ['dataset'] }],
    not: { required: ['case_ids', 'cases'] },
    // Scorers score a dataset's cases; only the synthetic solver runs without one, and never with one.
    dependencies: { scorers: ['dataset'] },
    allOf: [
      { if: { required: ['solver'], properties: { solver: { not: SYNTHETIC } } }, then: { required: ['dataset'] } },
      { if: { required: ['dataset'] }, then: { properties: { solver: { not: SYNTHETIC } } } },
    ],
  },
);
export type EvalStartPayload = Static<typeof EVAL_START_SCHEMA>;

/** Every command type with its payload schema: the one declaration both the validator and the types come from. */
export const COMMAND_PAYLOAD_SCHEMAS = {
  'agent.start': AGENT_START_SCHEMA,
  'agent.pause': Empty(),
  'agent.resume': Empty(),
  'agent.cancel': Empty(),
  'agent.inject_context': Type.Object({ text: Type.String({ minLength: 1, maxLength: 4096 }) }, { additionalProperties: false }),
  'agent.change_goal': Type.Object({ goal: Goal() }, { additionalProperties: false }),
  /** The run's new limits (totals, not increments); each given must be higher than the run's current one. */
  'agent.raise_budget': RUN_BUDGET_SCHEMA,
  'agent.fork': Type.Object(
    {
      from_run_id: Type.String({ pattern: RUN_ID_PATTERN }),
      snapshot_id: Type.String({ pattern: SNAPSHOT_ID_PATTERN }),
      goal: Type.Optional(Goal()),
      snapshots: Type.Optional(SNAPSHOT_SETTINGS_SCHEMA),
    },
    { additionalProperties: false },
  ),
  'eval.start': EVAL_START_SCHEMA,
  'eval.cancel': Empty(),
  'eval.retry_failed': Empty(),
  'eval.approve': Type.Object({ reviewer: Name() }, { additionalProperties: false }),
  /** An eval's new limits (totals), as `agent.raise_budget` for an agent; an eval paused on its budget goes on. */
  'eval.raise_budget': RUN_BUDGET_SCHEMA,
} satisfies Record<string, TSchema>;

/** Every command type with its payload: the union below is checked exhaustively by handlers. */
export type CommandPayloads = { [T in keyof typeof COMMAND_PAYLOAD_SCHEMAS]: Static<(typeof COMMAND_PAYLOAD_SCHEMAS)[T]> };
export type CommandType = keyof CommandPayloads;

/** The envelope every command shares. `payload` is checked per type, so its error names the type. */
export const COMMAND_ENVELOPE_SCHEMA = Type.Object(
  {
    command_id: Type.String({ pattern: COMMAND_ID_PATTERN }),
    type: Type.String(),
    org: Type.String({ pattern: ORG_PATTERN }),
    run_id: Type.String({ pattern: RUN_ID_PATTERN }),
    payload: AnyObject(),
  },
  { $id: 'https://agentrun.dev/schemas/command.v1.json', title: 'Command' },
);
export type CommandEnvelope = Static<typeof COMMAND_ENVELOPE_SCHEMA>;

export interface CommandOf<T extends CommandType> extends Omit<CommandEnvelope, 'type' | 'payload'> {
  type: T;
  payload: CommandPayloads[T];
}
export type Command = { [T in CommandType]: CommandOf<T> }[CommandType];

export const COMMAND_TYPES = Object.keys(COMMAND_PAYLOAD_SCHEMAS) as CommandType[];

export function isCommandType(type: string): type is CommandType {
  return Object.prototype.hasOwnProperty.call(COMMAND_PAYLOAD_SCHEMAS, type);
}

export function kindOfCommand(type: CommandType): RunKind {
  return type.startsWith('agent.') ? 'agent' : 'eval';
}
