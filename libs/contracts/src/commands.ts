import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { COMMAND_ID_PATTERN, ORG_PATTERN, RUN_ID_PATTERN, SNAPSHOT_ID_PATTERN } from './names';
import { AnyObject, StringEnum } from './schema';

export const RUN_KINDS = ['agent', 'eval'] as const;
export type RunKind = (typeof RUN_KINDS)[number];

export const AGENT_POLICIES = ['scripted', 'llm'] as const;
export type AgentPolicy = (typeof AGENT_POLICIES)[number];
export const TIERS = ['enterprise', 'team', 'batch'] as const;
export type Tier = (typeof TIERS)[number];

export const DEFAULT_MAX_STEPS = 8;

const Goal = () => Type.String({ minLength: 1, maxLength: 500, pattern: '\\S' });
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

const AGENT_START_SCHEMA = Type.Object(
  {
    goal: Goal(),
    max_steps: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000 })),
    policy: Type.Optional(StringEnum(AGENT_POLICIES)),
    tier: Type.Optional(StringEnum(TIERS)),
    owner: Type.Optional(Name()),
    snapshots: Type.Optional(SNAPSHOT_SETTINGS_SCHEMA),
  },
  { additionalProperties: false },
);
export type AgentStartPayload = Static<typeof AGENT_START_SCHEMA>;

const EVAL_START_SCHEMA = Type.Object(
  {
    model: Name(),
    suite: Name(),
    case_ids: Type.Optional(Type.Array(Name(), { minItems: 1, maxItems: 500, uniqueItems: true })),
    cases: Type.Optional(Type.Integer({ minimum: 1, maximum: 500 })),
    fail_fraction: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
    reviewers: Type.Optional(Type.Array(Name(), { maxItems: 50 })),
  },
  // Exactly one way to name the cases: a list of ids or a count.
  { additionalProperties: false, oneOf: [{ required: ['case_ids'] }, { required: ['cases'] }] },
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
