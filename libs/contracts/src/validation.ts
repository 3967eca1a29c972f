import Ajv, { type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import {
  COMMAND_ENVELOPE_SCHEMA,
  COMMAND_PAYLOAD_SCHEMAS,
  isCommandType,
  snapshotSettingsProblem,
  type AgentStartPayload,
  type Command,
  type CommandType,
} from './commands';
import {
  AGENT_STATE_SCHEMA,
  EVAL_STATE_SCHEMA,
  isRunEventType,
  RUN_EVENT_KINDS,
  RUN_EVENT_PAYLOAD_SCHEMAS,
  RUN_EVENT_SCHEMA,
  type RunEventEnvelope,
  type RunEventType,
} from './events';
import { COMMAND_ID_PATTERN, MAX_COMMAND_BYTES, MAX_JSON_DEPTH, normaliseOrg, ORG_PATTERN, RUN_ID_PATTERN } from './names';
import { Embedded, plainSchema } from './schema';
import type { DlqReason, RejectionReason } from './outcomes';
import { RUN_STATE_RECORD_SCHEMA, type RunStateRecord } from './run-state';
import { RUN_TOKEN_DELTA_SCHEMA, type RunTokenDelta } from './tokens';

const ajv = new Ajv({ allErrors: true, strict: false });
addFormats(ajv);

const envelope = ajv.compile(COMMAND_ENVELOPE_SCHEMA);
const payloads = Object.fromEntries(
  Object.entries(COMMAND_PAYLOAD_SCHEMAS).map(([type, schema]) => [type, ajv.compile(schema)]),
) as Record<CommandType, ValidateFunction>;
const runEvent = ajv.compile(RUN_EVENT_SCHEMA);
const agentState = ajv.compile(AGENT_STATE_SCHEMA);
const runStateRecord = ajv.compile(RUN_STATE_RECORD_SCHEMA);
const runTokenDelta = ajv.compile(RUN_TOKEN_DELTA_SCHEMA);
// Compiled on first use: only producers and their tests check payloads per type.
const eventPayloads = new Map<string, ValidateFunction>();
/**
 * The check of a type's payload; with the event's kind (one of those that publish the type), against
 * that kind's state alone. A type both kinds publish has a union of the two states, and a state that
 * fits neither would be described by the branch it came nearer to, which may be the other kind's
 * (an agent state without its `goal` was reported as a status that is not an eval status).
 */
function eventPayloadCheck(type: RunEventType, kind: string | undefined): ValidateFunction {
  const kinds: readonly string[] = RUN_EVENT_KINDS[type];
  const own = kind !== undefined && kinds.length > 1 && kinds.includes(kind) ? kind : undefined;
  const key = own === undefined ? type : `${type}/${own}`;
  let check = eventPayloads.get(key);
  if (!check) {
    const schema = plainSchema(RUN_EVENT_PAYLOAD_SCHEMAS[type]) as unknown as { properties: Record<string, unknown> };
    if (own !== undefined) schema.properties.state = Embedded(own === 'agent' ? AGENT_STATE_SCHEMA : EVAL_STATE_SCHEMA);
    check = ajv.compile(schema);
    eventPayloads.set(key, check);
  }
  return check;
}

/** Ajv's errors as one sentence a person can act on, e.g. `payload.goal must NOT have more than 8000 characters`. */
export function describeErrors(errors: ErrorObject[] | null | undefined, root = ''): string {
  if (!errors?.length) return 'invalid';
  const sentences = pickErrors(errors).map((e) => {
      // The root itself is named without a trailing dot: `payload: unknown field 'x'`.
      const at = `${root}${e.instancePath.replace(/^\//, '').replace(/\//g, '.')}`.replace(/\.$/, '');
      if (e.keyword === 'additionalProperties') {
        return `${at ? at + ': ' : ''}unknown field '${(e.params as { additionalProperty: string }).additionalProperty}'`;
      }
      if (e.keyword === 'enum') {
        return `${at || 'value'} must be one of ${(e.params as { allowedValues: unknown[] }).allowedValues.join(', ')}`;
      }
      return `${at || 'value'} ${e.message ?? 'is invalid'}`;
    });
  return [...new Set(sentences)].join('; ');
}

/**
 * The errors worth saying. A value that matches no branch of a union (`anyOf`) gets an error from every
 * branch; what helps is the branch it nearly matched. So the union's own summary goes; so does every
 * error of a branch whose `name` (a `const`) picked another branch; a wrong-type error goes when something
 * more specific is said about the value; and errors about the value itself go when a branch got further
 * into it (an error deeper inside).
 */
function pickErrors(errors: ErrorObject[]): ErrorObject[] {
  const kept = errors.filter((e) => e.keyword !== 'if');
  const unions = new Set(kept.filter((e) => e.keyword === 'anyOf' || e.keyword === 'oneOf').map((e) => e.instancePath));
  if (unions.size === 0) return kept;
  const branchOf = (e: ErrorObject) => /^(.*\/(?:anyOf|oneOf)\/\d+)\//.exec(e.schemaPath)?.[1];
  const otherName = new Set(kept.filter((e) => e.keyword === 'const').map(branchOf));
  let picked = kept.filter((e) => !['anyOf', 'oneOf', 'const'].includes(e.keyword) && !otherName.has(branchOf(e)));
  const inside = (e: ErrorObject, o: ErrorObject) => o.instancePath.startsWith(`${e.instancePath}/`);
  picked = picked.filter((e) => e.keyword !== 'type' || !picked.some((o) => o.keyword !== 'type' && (o.instancePath === e.instancePath || inside(e, o))));
  picked = picked.filter((e) => !(unions.has(e.instancePath) && picked.some((o) => inside(e, o))));
  return picked.length ? picked : kept;
}

export type CommandReading =
  | { kind: 'command'; command: Command }
  /** Readable enough to answer with an outcome record, but not a valid command. */
  | { kind: 'rejected'; command_id: string; org: string; run_id: string; type: string; reason: RejectionReason; message: string }
  /** Cannot be read as a command at all: the DLQ gets its bytes. */
  | { kind: 'unreadable'; reason: DlqReason; detail: string };

const commandIdRe = new RegExp(COMMAND_ID_PATTERN);
const orgRe = new RegExp(ORG_PATTERN);
const runIdRe = new RegExp(RUN_ID_PATTERN);
const typeRe = /^[a-z][a-z_.]{0,63}$/;

// eslint-disable-next-line no-control-regex -- NUL is exactly what is looked for
const UNSTORABLE_TEXT = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * Why `value` cannot be stored, or undefined: a string (or object key) Postgres cannot store as text
 * or jsonb (a NUL character or a lone UTF-16 surrogate), or nesting deeper than MAX_JSON_DEPTH. Such
 * input is refused at the boundary; otherwise it would fail every later write of the run's state and
 * stall the consumer that carries it. The walk keeps its own stack rather than recursing, so a value
 * nested thousands of levels deep gets an answer instead of a RangeError (which stalled a partition).
 */
export function storageProblem(value: unknown, root = ''): string | undefined {
  const stack: { item: unknown; path: string; depth: number }[] = [{ item: value, path: root, depth: 0 }];
  for (let next = stack.pop(); next; next = stack.pop()) {
    const { item, path, depth } = next;
    if (typeof item === 'string') {
      if (UNSTORABLE_TEXT.test(item)) return `${path || 'value'} contains a NUL character or a lone surrogate`;
      continue;
    }
    if (typeof item !== 'object' || item === null) continue;
    if (depth >= MAX_JSON_DEPTH) return `${path || 'value'} is nested more than ${MAX_JSON_DEPTH} levels deep`;
    // Pushed in reverse, so the first problem in document order is the one reported.
    const children: [path: string, child: unknown, key?: string][] = Array.isArray(item)
      ? item.map((child, i): [string, unknown] => [`${path}[${i}]`, child])
      : Object.entries(item).map(([key, child]): [string, unknown, string] => [path ? `${path}.${key}` : key, child, key]);
    for (let i = children.length - 1; i >= 0; i--) {
      const [at, child, key] = children[i];
      stack.push({ item: child, path: at, depth: depth + 1 });
      // A key is checked as a string, just before its value.
      if (key !== undefined) stack.push({ item: key, path: at, depth: depth + 1 });
    }
  }
  return undefined;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The value as text, or undefined when its bytes are not UTF-8. JSON on the wire is UTF-8 (RFC 8259);
 * decoding leniently would turn bad bytes into U+FFFD and store text the sender never wrote.
 */
export function decodeUtf8(value: Uint8Array): string | undefined {
  try {
    return utf8.decode(value);
  } catch {
    return undefined;
  }
}

/** Reads one command value off the wire. Never throws. */
export function readCommand(value: Buffer | null | undefined): CommandReading {
  if (!value || value.length === 0) return { kind: 'unreadable', reason: 'not_json', detail: 'empty message value' };
  if (value.length > MAX_COMMAND_BYTES) {
    return { kind: 'unreadable', reason: 'too_large', detail: `value is ${value.length} bytes; the limit is ${MAX_COMMAND_BYTES}` };
  }
  const text = decodeUtf8(value);
  if (text === undefined) return { kind: 'unreadable', reason: 'not_json', detail: 'value is not valid UTF-8' };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    return { kind: 'unreadable', reason: 'not_json', detail: (err as Error).message };
  }
  return checkCommand(parsed);
}

/**
 * Checks an already-parsed value (the gateway's path) the same way the Kafka path does. The command
 * (or the rejection) carries the org normalised (see normaliseOrg), whatever case the sender used.
 */
export function checkCommand(parsed: unknown): CommandReading {
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    return { kind: 'unreadable', reason: 'not_a_command', detail: 'value is not a JSON object' };
  }
  const raw = parsed as Record<string, unknown>;
  if (typeof raw.command_id !== 'string' || !commandIdRe.test(raw.command_id)) {
    return { kind: 'unreadable', reason: 'not_a_command', detail: 'command_id is missing or not 1-128 printable ASCII characters' };
  }
  if (typeof raw.org !== 'string' || !orgRe.test(raw.org)) {
    return { kind: 'unreadable', reason: 'not_a_command', detail: `org is missing or does not match ${ORG_PATTERN}` };
  }
  // Only well-formed values are echoed into the ledger and the outcome record; the org as every layer
  // after this one knows it (lowercase), so the outcome names the org the command acted in.
  const base = {
    command_id: raw.command_id,
    org: normaliseOrg(raw.org),
    run_id: typeof raw.run_id === 'string' && runIdRe.test(raw.run_id) ? raw.run_id : '',
    type: typeof raw.type === 'string' && typeRe.test(raw.type) ? raw.type : '',
  };
  if (!envelope(raw)) {
    return { kind: 'rejected', ...base, reason: 'invalid_payload', message: describeErrors(envelope.errors) };
  }
  if (!isCommandType(base.type)) {
    return { kind: 'rejected', ...base, reason: 'unknown_type', message: `unknown command type '${base.type}'` };
  }
  const unstorable = storageProblem(raw.payload, 'payload');
  if (unstorable) return { kind: 'rejected', ...base, reason: 'invalid_payload', message: unstorable };
  const problem = payloadProblem(base.type, raw.payload);
  if (problem) return { kind: 'rejected', ...base, reason: 'invalid_payload', message: problem };
  return {
    kind: 'command',
    command: { command_id: base.command_id, type: base.type, org: base.org, run_id: base.run_id, payload: raw.payload } as Command,
  };
}

/**
 * The commands whose snapshot series must be able to capture (see snapshotSettingsProblem). An eval's
 * `snapshots` is not among them: its cases' runs always take the final capture, whatever `at_end` says.
 */
export const CAPTURE_CHECKED_COMMANDS: readonly CommandType[] = ['agent.start', 'agent.fork'];

/** Checks one payload against its type's schema; returns a message or undefined when valid. */
export function payloadProblem(type: CommandType, payload: unknown): string | undefined {
  const check = payloads[type];
  if (!check(payload)) return describeErrors(check.errors, 'payload.');
  // What a schema cannot say plainly: a snapshot series that would never capture.
  if (CAPTURE_CHECKED_COMMANDS.includes(type)) {
    const { snapshots } = payload as Pick<AgentStartPayload, 'snapshots'>;
    const never = snapshots && snapshotSettingsProblem(snapshots);
    if (never) return `payload.snapshots: ${never}`;
  }
  return undefined;
}

/** A message value as JSON, or why it is not: empty, not UTF-8, or not JSON. */
function parseJsonValue(value: Uint8Array | null | undefined): { ok: true; value: unknown } | { ok: false; detail: string } {
  if (!value || value.length === 0) return { ok: false, detail: 'empty message value' };
  const text = decodeUtf8(value);
  if (text === undefined) return { ok: false, detail: 'not UTF-8' };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (err) {
    return { ok: false, detail: `not JSON: ${(err as Error).message}` };
  }
}

/**
 * Reads one event off the topic. Only the envelope is checked (and an agent's state): an unknown
 * type or an extra field is read, not refused, so a newer producer never stalls an older reader.
 */
export type EventReading = { ok: true; event: RunEventEnvelope } | { ok: false; detail: string };

export function readRunEvent(value: Buffer | null | undefined): EventReading {
  const json = parseJsonValue(value);
  if (!json.ok) return json;
  const parsed = json.value;
  if (!runEvent(parsed)) return { ok: false, detail: describeErrors(runEvent.errors) };
  const unstorable = storageProblem(parsed);
  if (unstorable) return { ok: false, detail: unstorable };
  const event = parsed as RunEventEnvelope;
  if (event.kind === 'agent' && event.payload.state && !agentState(event.payload.state)) {
    return { ok: false, detail: describeErrors(agentState.errors, 'payload.state.') };
  }
  return { ok: true, event };
}

/**
 * The stricter check of a known type's payload against its catalogue schema, or undefined when it
 * fits (or the type is not known). Not applied on the topic: it is for producers and their tests.
 * Given the event's `kind`, its state is checked as that kind's.
 */
export function runEventPayloadProblem(event: Pick<RunEventEnvelope, 'type' | 'payload'> & { kind?: string }): string | undefined {
  if (!isRunEventType(event.type)) return undefined;
  const check = eventPayloadCheck(event.type, event.kind);
  return check(event.payload) ? undefined : describeErrors(check.errors, 'payload.');
}

export type RunStateReading = { ok: true; record: RunStateRecord } | { ok: false; detail: string };

/** A record's value as JSON that `check` accepts, or why not. Never throws. */
function readChecked<T>(check: ValidateFunction, value: Uint8Array | null | undefined): { ok: true; value: T } | { ok: false; detail: string } {
  const json = parseJsonValue(value);
  if (!json.ok) return json;
  if (!check(json.value)) return { ok: false, detail: describeErrors(check.errors) };
  return { ok: true, value: json.value as T };
}

/** Reads one record of `agentrun.run-state.v1`. Never throws. */
export function readRunStateRecord(value: Uint8Array | null | undefined): RunStateReading {
  const read = readChecked<RunStateRecord>(runStateRecord, value);
  return read.ok ? { ok: true, record: read.value } : read;
}

export type RunTokenReading = { ok: true; delta: RunTokenDelta } | { ok: false; detail: string };

/** Reads one record of `agentrun.run-tokens.v1`. Never throws. */
export function readRunTokenDelta(value: Uint8Array | null | undefined): RunTokenReading {
  const read = readChecked<RunTokenDelta>(runTokenDelta, value);
  return read.ok ? { ok: true, delta: read.value } : read;
}

export { buildCommand, CommandBuildError, type BuiltCommand, type CommandParts } from './builder';
