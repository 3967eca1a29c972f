/**
 * Property tests of the wire checks: commands and run events are generated from the schemas themselves
 * (a small JSON Schema -> fast-check translation below), so every type and every field the catalogue
 * declares is covered, and a field added later is covered without touching this file.
 */
import Ajv from 'ajv';
import * as fc from 'fast-check';
import { COMMAND_ENVELOPE_SCHEMA, COMMAND_PAYLOAD_SCHEMAS, COMMAND_TYPES, snapshotSettingsProblem, type CommandType, type SnapshotSettings } from './commands';
import { AGENT_STATE_SCHEMA, EVAL_STATE_SCHEMA, RUN_EVENT_FIELDS, RUN_EVENT_KINDS, RUN_EVENT_SCHEMA, RUN_EVENT_TYPES, type RunEventType } from './events';
import { normaliseOrg } from './names';
import { AGENT_STATUSES, EVAL_STATUSES } from './statuses';
import { plainSchema } from './schema';
import { buildCommand, checkCommand, readCommand, readRunEvent, runEventPayloadProblem } from './validation';

// ---------------------------------------------------------------------------------------------------
// JSON Schema -> arbitrary, for the subset the catalogue uses.
// ---------------------------------------------------------------------------------------------------

interface Schema {
  type?: string;
  const?: unknown;
  enum?: unknown[];
  anyOf?: Schema[];
  not?: unknown;
  allOf?: unknown[];
  dependencies?: unknown;
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean;
  patternProperties?: Record<string, Schema>;
  minProperties?: number;
  items?: Schema;
  minItems?: number;
  maxItems?: number;
  uniqueItems?: boolean;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  format?: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
}

/** Generated strings and arrays stay short: the limits are probed by the mutations, not by generation. */
const STRING_CAP = 24;
const ARRAY_CAP = 3;

const codePoints = (s: string) => [...s].length;
/** Any code point but NUL (which Postgres cannot store, so it is refused on purpose). */
const text = (minLength: number, maxLength: number) => fc.string({ unit: 'binary', minLength, maxLength }).filter((s) => !s.includes('\u0000'));
const json = fc.jsonValue({ maxDepth: 2, stringUnit: 'grapheme' });

function arbitraryOf(schema: Schema): fc.Arbitrary<unknown> {
  if (schema.const !== undefined) return fc.constant(schema.const);
  if (schema.enum) return fc.constantFrom(...schema.enum);
  if (schema.anyOf) return fc.oneof(...schema.anyOf.map(arbitraryOf));
  switch (schema.type) {
    case 'null':
      return fc.constant(null);
    case 'boolean':
      return fc.boolean();
    case 'integer': {
      const min = schema.exclusiveMinimum !== undefined ? Math.floor(schema.exclusiveMinimum) + 1 : (schema.minimum ?? -(2 ** 31));
      return fc.bigInt({ min: BigInt(min), max: BigInt(schema.maximum ?? 2 ** 31) }).map(Number);
    }
    case 'number':
      return fc
        .double({ min: schema.minimum ?? schema.exclusiveMinimum ?? -1e12, max: schema.maximum ?? 1e12, minExcluded: schema.exclusiveMinimum !== undefined, noNaN: true })
        .map((n) => n + 0); // -0 travels as 0
    case 'string':
      return stringOf(schema);
    case 'array': {
      const item = arbitraryOf(schema.items ?? {});
      const minLength = schema.minItems ?? 0;
      const maxLength = Math.min(schema.maxItems ?? ARRAY_CAP, Math.max(minLength, ARRAY_CAP));
      return schema.uniqueItems ? fc.uniqueArray(item, { minLength, maxLength, selector: (v) => JSON.stringify(v) }) : fc.array(item, { minLength, maxLength });
    }
    case 'object':
      return objectOf(schema);
    default:
      throw new Error(`no arbitrary for ${JSON.stringify(schema).slice(0, 200)}`);
  }
}

function stringOf(schema: Schema): fc.Arbitrary<string> {
  if (schema.format === 'date-time') {
    return fc.date({ min: new Date('1970-01-01T00:00:00Z'), max: new Date('2100-01-01T00:00:00Z'), noInvalidDate: true }).map((d) => d.toISOString());
  }
  const min = schema.minLength ?? 0;
  const max = schema.maxLength ?? Infinity;
  if (schema.pattern?.startsWith('^') && schema.pattern.endsWith('$')) {
    return fc.stringMatching(new RegExp(schema.pattern)).filter((s) => codePoints(s) >= min && codePoints(s) <= max);
  }
  const re = schema.pattern === undefined ? undefined : new RegExp(schema.pattern, 'u');
  return text(min, Math.min(max, Math.max(min, STRING_CAP))).filter((s) => !re || re.test(s));
}

/** Rules across fields (`anyOf` of required sets, `not`, `dependencies`, `if`/`then`) are the caller's to satisfy. */
const CROSS_FIELD = ['anyOf', 'not', 'allOf', 'dependencies'] as const;

function objectOf(schema: Schema, options: { require?: string[]; omit?: string[]; crossFieldByCaller?: boolean } = {}): fc.Arbitrary<Record<string, unknown>> {
  if (!options.crossFieldByCaller && CROSS_FIELD.some((k) => schema[k] !== undefined)) throw new Error('cross-field rules: generate with objectOf(schema, { crossFieldByCaller: true })');
  if (schema.patternProperties) {
    const [value] = Object.values(schema.patternProperties);
    return fc.dictionary(text(1, 8), arbitraryOf(value), { maxKeys: 3, noNullPrototype: true });
  }
  if (!schema.properties) {
    // Any object (AnyObject): its fields are checked elsewhere, if at all.
    return schema.additionalProperties === false ? fc.constant({}) : fc.dictionary(text(1, 8), json, { maxKeys: 3, noNullPrototype: true });
  }
  const omit = new Set(options.omit);
  const props = Object.fromEntries(
    Object.entries(schema.properties)
      .filter(([k]) => !omit.has(k))
      .map(([k, v]) => [k, arbitraryOf(v)]),
  );
  const requiredKeys = [...(schema.required ?? []), ...(options.require ?? [])].filter((k) => k in props);
  const record = fc.record(props, { requiredKeys });
  const least = schema.minProperties ?? 0;
  return least > 0 ? record.filter((o) => Object.keys(o).length >= least) : record;
}

const plain = <T>(schema: T) => plainSchema(schema) as unknown as Schema;

// ---------------------------------------------------------------------------------------------------
// Valid commands.
// ---------------------------------------------------------------------------------------------------

const isSynthetic = (solver: unknown) => solver === 'synthetic' || (typeof solver === 'object' && solver !== null && (solver as { name?: unknown }).name === 'synthetic');
const capturesSomething = (p: Record<string, unknown>) => p.snapshots === undefined || snapshotSettingsProblem(p.snapshots as SnapshotSettings) === undefined;

const PAYLOADS = Object.fromEntries(COMMAND_TYPES.map((type) => [type, plain(COMMAND_PAYLOAD_SCHEMAS[type])])) as Record<CommandType, Schema>;

function payloadOf(type: CommandType): fc.Arbitrary<Record<string, unknown>> {
  const schema = PAYLOADS[type];
  if (type !== 'eval.start') return objectOf(schema).filter(capturesSomething);
  // eval.start's cases: a suite with a count or a list of ids (no dataset, so no scorers and only the
  // synthetic solver), or a dataset (a real solver, and a count or ids, not both).
  const by = (key: string) => objectOf(schema, { require: ['suite', key], omit: ['dataset', 'scorers', 'solver', key === 'cases' ? 'case_ids' : 'cases'], crossFieldByCaller: true });
  return fc.oneof(
    by('cases'),
    by('case_ids'),
    objectOf(schema, { require: ['dataset'], crossFieldByCaller: true }).filter((p) => !isSynthetic(p.solver) && !(p.cases !== undefined && p.case_ids !== undefined)),
  );
}

const envelope = plain(COMMAND_ENVELOPE_SCHEMA).properties!;
const commandOf = (type: CommandType) =>
  fc.record({
    command_id: stringOf(envelope.command_id),
    type: fc.constant(type),
    org: stringOf(envelope.org),
    run_id: stringOf(envelope.run_id),
    payload: payloadOf(type),
  });
const anyCommand = fc.oneof(...COMMAND_TYPES.map(commandOf));

// ---------------------------------------------------------------------------------------------------
// Fields and how to break them.
// ---------------------------------------------------------------------------------------------------

const ajv = new Ajv({ strict: false, allErrors: true });
/** The branch of a union a value is an instance of (the first that fits). */
function branchOf(schema: Schema, value: unknown): Schema | undefined {
  return schema.anyOf?.find((b) => ajv.validate(b, value));
}

interface Field {
  /** Keys and array indexes from the message root. */
  path: (string | number)[];
  schema: Schema;
  required: boolean;
}

/** Every field present in `value`, at any depth, with its schema. */
function fieldsOf(schema: Schema, value: unknown, path: (string | number)[] = []): Field[] {
  const s = schema.anyOf ? (branchOf(schema, value) ?? schema) : schema;
  if (Array.isArray(value) && s.items) return value.flatMap((v, i) => fieldsOf(s.items!, v, [...path, i]));
  if (typeof value !== 'object' || value === null || !s.properties) return [];
  return Object.entries(s.properties).flatMap(([key, child]) =>
    key in value ? [{ path: [...path, key], schema: child, required: (s.required ?? []).includes(key) }, ...fieldsOf(child, (value as Record<string, unknown>)[key], [...path, key])] : [],
  );
}

function jsonTypesOf(schema: Schema): Set<string> {
  if (schema.anyOf) return new Set(schema.anyOf.flatMap((b) => [...jsonTypesOf(b)]));
  const values = schema.enum ?? (schema.const !== undefined ? [schema.const] : undefined);
  if (values) return new Set(values.map((v) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v)));
  return new Set([schema.type === 'integer' ? 'number' : (schema.type ?? 'any')]);
}

const OF_TYPE: [string, unknown][] = [
  ['number', 42],
  ['string', 'x'],
  ['boolean', true],
  ['array', []],
  ['object', {}],
];

/** Values of the field's JSON type (or near it) that its schema refuses: out of range, not allowed, malformed. */
function invalidValues(schema: Schema, value: unknown): unknown[] {
  const out: unknown[] = [];
  if (schema.enum) out.push('not-one-of-these');
  if (schema.const !== undefined) out.push(typeof schema.const === 'string' ? `${schema.const}-not` : 'not-the-constant');
  if (schema.type === 'integer' || schema.type === 'number') {
    if (schema.maximum !== undefined) out.push(schema.maximum + 1);
    if (schema.minimum !== undefined) out.push(schema.minimum - 1);
    if (schema.exclusiveMinimum !== undefined) out.push(schema.exclusiveMinimum);
    if (schema.type === 'integer') out.push((schema.minimum ?? schema.exclusiveMinimum ?? 0) + 1.5);
  }
  if (schema.type === 'string') {
    if (schema.maxLength !== undefined) out.push('x'.repeat(schema.maxLength + 1));
    if ((schema.minLength ?? 0) > 0) out.push('');
    if (schema.pattern !== undefined) {
      const re = new RegExp(schema.pattern, 'u');
      const failing = ['', ' ', '../x', '-x', 'é', 'x'.repeat(300)].find((s) => !re.test(s) && codePoints(s) >= (schema.minLength ?? 0) && codePoints(s) <= (schema.maxLength ?? Infinity));
      if (failing !== undefined) out.push(failing);
    }
    if (schema.format === 'date-time') out.push('yesterday');
  }
  if (schema.type === 'array' && Array.isArray(value) && value.length > 0) {
    if (schema.maxItems !== undefined) out.push(Array.from({ length: schema.maxItems + 1 }, (_, i) => (schema.uniqueItems ? `${i}-unique` : value[0])));
    if (schema.uniqueItems && value.length > 0) out.push([value[0], value[0]]);
  }
  if (schema.type === 'array' && (schema.minItems ?? 0) > 0) out.push([]);
  if (schema.type === 'object' && schema.additionalProperties === false && schema.properties && typeof value === 'object') out.push({ ...value, zz_unknown: 1 });
  return out;
}

type Mutation = { field: Field; how: string; apply: (message: Record<string, unknown>) => Record<string, unknown> };

function mutationsOf(message: Record<string, unknown>, schema: Schema): Mutation[] {
  const out: Mutation[] = [];
  for (const field of fieldsOf(schema, message)) {
    const value = getAt(message, field.path);
    if (field.required) out.push({ field, how: 'dropped', apply: (m) => setAt(m, field.path, undefined) });
    const allowed = jsonTypesOf(field.schema);
    const wrong = allowed.has('any') ? undefined : OF_TYPE.find(([t]) => !allowed.has(t));
    if (wrong) out.push({ field, how: `set to ${JSON.stringify(wrong[1])}`, apply: (m) => setAt(m, field.path, wrong[1]) });
    for (const bad of invalidValues(field.schema, value)) out.push({ field, how: `set to ${JSON.stringify(bad).slice(0, 40)}`, apply: (m) => setAt(m, field.path, bad) });
  }
  return out;
}

function getAt(value: unknown, path: (string | number)[]): unknown {
  return path.reduce<unknown>((v, k) => (v as Record<string | number, unknown>)[k], value);
}

/** A copy with the value at `path` replaced (or, undefined, removed). */
function setAt<T>(value: T, path: (string | number)[], to: unknown): T {
  const copy = structuredClone(value) as Record<string | number, unknown>;
  const parent = getAt(copy, path.slice(0, -1)) as Record<string | number, unknown>;
  const key = path[path.length - 1];
  if (to === undefined) delete parent[key];
  else parent[key] = to;
  return copy as T;
}

/** How an error names a field: `payload.snapshots.max_snapshots`, `payload.dataset.cases.0.id`. */
const dotted = (path: (string | number)[]) => path.join('.');

/** The error names the field: its whole path, or (a missing one) its parent and its name. */
function expectNamed(error: string, field: Field, how: string): void {
  const parent = dotted(field.path.slice(0, -1));
  const name = String(field.path[field.path.length - 1]);
  const named = how === 'dropped' ? error.includes(`'${name}'`) || error.startsWith(`${name} `) : error.includes(dotted(field.path));
  if (!named || (how === 'dropped' && parent && !error.includes(parent))) {
    throw new Error(`${dotted(field.path)} ${how}: the error does not name it: ${error}`);
  }
}

const runs = { numRuns: 100 };

// ---------------------------------------------------------------------------------------------------

describe('commands, generated from the catalogue (properties)', () => {
  it('a valid command round-trips: serialised, read off the wire and checked, it is the command sent (org lowercased)', () => {
    fc.assert(
      fc.property(anyCommand, (command) => {
        const expected = { ...command, org: normaliseOrg(command.org) };
        expect(readCommand(Buffer.from(JSON.stringify(command)))).toEqual({ kind: 'command', command: expected });
        // The sender's builder agrees, and what it sends reads back as what it returned.
        const built = buildCommand(command.type, { command_id: command.command_id, org: command.org, run_id: command.run_id, payload: command.payload as never });
        expect(built.command).toEqual(expected);
        expect(readCommand(Buffer.from(built.value))).toEqual({ kind: 'command', command: built.command });
      }),
      runs,
    );
  });

  it('every field dropped, of a wrong type or out of range is refused, and the error names the field', () => {
    fc.assert(
      fc.property(anyCommand, (command) => {
        const schema: Schema = { ...plain(COMMAND_ENVELOPE_SCHEMA), properties: { ...envelope, payload: PAYLOADS[command.type] } };
        for (const { field, how, apply } of mutationsOf(command, schema)) {
          const reading = checkCommand(apply(command));
          if (reading.kind === 'command') throw new Error(`${dotted(field.path)} ${how}: accepted`);
          expectNamed(reading.kind === 'rejected' ? reading.message : reading.detail, field, how);
        }
      }),
      { numRuns: 30 },
    );
  });
});

// ---------------------------------------------------------------------------------------------------
// Run events.
// ---------------------------------------------------------------------------------------------------

const runEventEnvelope = plain(RUN_EVENT_SCHEMA).properties!;
/** The statuses one kind of run has and the other has not. */
const ONLY_STATUSES = {
  agent: AGENT_STATUSES.filter((s) => !(EVAL_STATUSES as readonly string[]).includes(s)),
  eval: EVAL_STATUSES.filter((s) => !(AGENT_STATUSES as readonly string[]).includes(s)),
};
const STATES = { agent: plain(AGENT_STATE_SCHEMA), eval: plain(EVAL_STATE_SCHEMA) };
const eventPayloadSchemas = new Map<string, Schema>();
/** A known type's payload schema for one kind of run: its fields and that kind's whole state. */
function eventPayloadSchema(type: RunEventType, kind: 'agent' | 'eval'): Schema {
  const key = `${type}/${kind}`;
  if (!eventPayloadSchemas.has(key)) {
    const fields = plain(RUN_EVENT_FIELDS[type]);
    eventPayloadSchemas.set(key, { ...fields, properties: { ...fields.properties, state: STATES[kind] }, required: [...(fields.required ?? []), 'state'] });
  }
  return eventPayloadSchemas.get(key)!;
}

const anyEvent = fc.oneof(
  ...RUN_EVENT_TYPES.flatMap((type) =>
    RUN_EVENT_KINDS[type].map((kind) =>
      fc.record({
        run_id: stringOf(runEventEnvelope.run_id),
        org: stringOf(runEventEnvelope.org),
        kind: fc.constant(kind),
        seq: arbitraryOf(runEventEnvelope.seq),
        type: fc.constant(type),
        ts: stringOf(runEventEnvelope.ts),
        payload: objectOf(eventPayloadSchema(type, kind)),
      }),
    ),
  ),
);

describe('run events, generated from the catalogue (properties)', () => {
  it('a valid event of every known type round-trips through the topic reader, and fits its catalogue schema', () => {
    fc.assert(
      fc.property(anyEvent, (event) => {
        expect(readRunEvent(Buffer.from(JSON.stringify(event)))).toEqual({ ok: true, event });
        expect(runEventPayloadProblem(event)).toBeUndefined();
      }),
      runs,
    );
  });

  it('every envelope field and agent-state field broken is refused by the topic reader, naming the field', () => {
    fc.assert(
      fc.property(anyEvent, (event) => {
        // The reader checks the envelope, the state's status and (agent runs) the whole agent state; the rest of the payload is open.
        const payload: Schema = { type: 'object', properties: { state: event.kind === 'agent' ? STATES.agent : { type: 'object', properties: { status: STATES.eval.properties!.status } } } };
        const schema: Schema = { ...plain(RUN_EVENT_SCHEMA), properties: { ...runEventEnvelope, payload } };
        for (const { field, how, apply } of mutationsOf(event, schema)) {
          const reading = readRunEvent(Buffer.from(JSON.stringify(apply(event))));
          if (reading.ok) throw new Error(`${dotted(field.path)} ${how}: accepted`);
          expectNamed(reading.detail, field, how);
        }
      }),
      { numRuns: 30 },
    );
  });

  it("every payload field broken is refused by the producers' check against the catalogue, naming the field", () => {
    fc.assert(
      fc.property(anyEvent, fc.nat(), (generated, pick) => {
        // Half the time a status only this kind has: where a state that fits neither kind's is easiest to misdescribe.
        const own = ONLY_STATUSES[generated.kind];
        const event = pick % 2 === 0 ? generated : { ...generated, payload: { ...generated.payload, state: { ...(generated.payload.state as object), status: own[pick % own.length] } } };
        const schema = eventPayloadSchema(event.type, event.kind);
        for (const { field, how, apply } of mutationsOf(event.payload, schema)) {
          const problem = runEventPayloadProblem({ type: event.type, kind: event.kind, payload: apply(event.payload) });
          if (problem === undefined) throw new Error(`payload.${dotted(field.path)} ${how}: accepted`);
          expectNamed(problem, { ...field, path: ['payload', ...field.path] }, how);
        }
      }),
      { numRuns: 30 },
    );
  });
});
