import { COMMAND_ID_PATTERN, ORG_PATTERN, RUN_ID_PATTERN, SNAPSHOT_ID_PATTERN } from './names';

export const RUN_KINDS = ['agent', 'eval'] as const;
export type RunKind = (typeof RUN_KINDS)[number];

export const AGENT_POLICIES = ['scripted', 'llm'] as const;
export type AgentPolicy = (typeof AGENT_POLICIES)[number];
export const TIERS = ['enterprise', 'team', 'batch'] as const;
export type Tier = (typeof TIERS)[number];

export const DEFAULT_MAX_STEPS = 8;

/**
 * A run's capture series. Its presence is the switch: absent means no snapshots. `interval_seconds`
 * is the gap between captures (0 or absent: no cadence); `per_turn` captures after each step, before
 * the next; `at_end` (default true) takes one final capture, exempt from `max_snapshots` (default 24,
 * interior captures only); `timeout_seconds` (default 300) bounds each capture, retries included.
 */
export interface SnapshotSettings {
  interval_seconds?: number;
  per_turn?: boolean;
  at_end?: boolean;
  max_snapshots?: number;
  timeout_seconds?: number;
}

export const SNAPSHOT_DEFAULTS = { at_end: true, per_turn: false, timeout_seconds: 300, max_snapshots: 24 } as const;

/** Why a snapshot configuration can never capture, or undefined when it can. */
export function snapshotSettingsProblem(settings: SnapshotSettings): string | undefined {
  const ticks = (settings.interval_seconds ?? 0) > 0;
  if ((settings.at_end ?? SNAPSHOT_DEFAULTS.at_end) === false && !ticks && !settings.per_turn) {
    return `snapshots with at_end=false need a positive interval_seconds (got ${settings.interval_seconds ?? 'none'}) or per_turn=true; otherwise no capture ever runs`;
  }
  return undefined;
}

export interface AgentStartPayload {
  goal: string;
  max_steps?: number;
  policy?: AgentPolicy;
  tier?: Tier;
  owner?: string;
  snapshots?: SnapshotSettings;
}

export interface EvalStartPayload {
  model: string;
  suite: string;
  case_ids?: string[];
  cases?: number;
  fail_fraction?: number;
  reviewers?: string[];
}

/** Every command type with its payload: the union below is checked exhaustively by handlers. */
export interface CommandPayloads {
  'agent.start': AgentStartPayload;
  'agent.pause': Record<string, never>;
  'agent.resume': Record<string, never>;
  'agent.cancel': Record<string, never>;
  'agent.inject_context': { text: string };
  'agent.change_goal': { goal: string };
  'agent.fork': { from_run_id: string; snapshot_id: string; goal?: string; snapshots?: SnapshotSettings };
  'eval.start': EvalStartPayload;
  'eval.cancel': Record<string, never>;
  'eval.retry_failed': Record<string, never>;
  'eval.approve': { reviewer: string };
}
export type CommandType = keyof CommandPayloads;

export interface CommandOf<T extends CommandType> {
  command_id: string;
  type: T;
  org: string;
  run_id: string;
  payload: CommandPayloads[T];
}
export type Command = { [T in CommandType]: CommandOf<T> }[CommandType];

const goal = { type: 'string', minLength: 1, maxLength: 500, pattern: '\\S' } as const;
const empty = { type: 'object', additionalProperties: false, properties: {} } as const;
const name = { type: 'string', minLength: 1, maxLength: 200 } as const;

const SNAPSHOTS_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  properties: {
    interval_seconds: { type: 'number', minimum: 0, maximum: 86_400 },
    per_turn: { type: 'boolean' },
    at_end: { type: 'boolean' },
    max_snapshots: { type: 'integer', minimum: 1, maximum: 1_000 },
    timeout_seconds: { type: 'number', exclusiveMinimum: 0, maximum: 3_600 },
  },
} as const;

/** The envelope every command shares. `payload` is checked per type, so its error names the type. */
export const COMMAND_ENVELOPE_SCHEMA = {
  $id: 'https://agentrun.dev/schemas/command.v1.json',
  title: 'Command',
  type: 'object',
  required: ['command_id', 'type', 'org', 'run_id', 'payload'],
  properties: {
    command_id: { type: 'string', pattern: COMMAND_ID_PATTERN },
    type: { type: 'string' },
    org: { type: 'string', pattern: ORG_PATTERN },
    run_id: { type: 'string', pattern: RUN_ID_PATTERN },
    payload: { type: 'object' },
  },
} as const;

export const COMMAND_PAYLOAD_SCHEMAS: Record<CommandType, object> = {
  'agent.start': {
    type: 'object',
    additionalProperties: false,
    required: ['goal'],
    properties: {
      goal,
      max_steps: { type: 'integer', minimum: 1, maximum: 10_000 },
      policy: { enum: AGENT_POLICIES },
      tier: { enum: TIERS },
      owner: name,
      snapshots: SNAPSHOTS_SCHEMA,
    },
  },
  'agent.pause': empty,
  'agent.resume': empty,
  'agent.cancel': empty,
  'agent.inject_context': {
    type: 'object',
    additionalProperties: false,
    required: ['text'],
    properties: { text: { type: 'string', minLength: 1, maxLength: 4096 } },
  },
  'agent.change_goal': { type: 'object', additionalProperties: false, required: ['goal'], properties: { goal } },
  'agent.fork': {
    type: 'object',
    additionalProperties: false,
    required: ['from_run_id', 'snapshot_id'],
    properties: { from_run_id: { type: 'string', pattern: RUN_ID_PATTERN }, snapshot_id: { type: 'string', pattern: SNAPSHOT_ID_PATTERN }, goal, snapshots: SNAPSHOTS_SCHEMA },
  },
  'eval.start': {
    type: 'object',
    additionalProperties: false,
    required: ['model', 'suite'],
    properties: {
      model: name,
      suite: name,
      case_ids: { type: 'array', minItems: 1, maxItems: 500, uniqueItems: true, items: name },
      cases: { type: 'integer', minimum: 1, maximum: 500 },
      fail_fraction: { type: 'number', minimum: 0, maximum: 1 },
      reviewers: { type: 'array', maxItems: 50, items: name },
    },
    oneOf: [{ required: ['case_ids'] }, { required: ['cases'] }],
  },
  'eval.cancel': empty,
  'eval.retry_failed': empty,
  'eval.approve': { type: 'object', additionalProperties: false, required: ['reviewer'], properties: { reviewer: name } },
};

export const COMMAND_TYPES = Object.keys(COMMAND_PAYLOAD_SCHEMAS) as CommandType[];

export function isCommandType(type: string): type is CommandType {
  return Object.prototype.hasOwnProperty.call(COMMAND_PAYLOAD_SCHEMAS, type);
}

export function kindOfCommand(type: CommandType): RunKind {
  return type.startsWith('agent.') ? 'agent' : 'eval';
}
