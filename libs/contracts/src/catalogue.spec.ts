import Ajv from 'ajv';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { COMMAND_ENVELOPE_SCHEMA, COMMAND_PAYLOAD_SCHEMAS } from './commands';
import { AGENT_STATE_SCHEMA, RUN_EVENT_SCHEMA, RUN_EVENT_TYPES, type RunEvent } from './events';
import { COMMAND_OUTCOME_SCHEMA, DLQ_RECORD_SCHEMA } from './outcomes';
import { plainSchema } from './schema';
import { TOOL_LANES, toolsOnLane } from './tool-names';
import { TOOL_CATALOGUE, toolFunctionSpec } from './tools';
import { buildCommand, CommandBuildError, readRunStateRecord, runEventPayloadProblem } from './validation';

/**
 * `current` with every property `v1` does not declare taken out (at any depth), and the names of those
 * properties: what is left must be exactly v1, and none of the added ones may be required.
 */
function withoutAdditions(current: unknown, v1: unknown, path = '$'): { pruned: unknown; added: { path: string; required: boolean }[] } {
  if (Array.isArray(current) && Array.isArray(v1)) {
    const parts = current.map((c, i) => withoutAdditions(c, v1[i], `${path}[${i}]`));
    return { pruned: parts.map((p) => p.pruned), added: parts.flatMap((p) => p.added) };
  }
  if (!current || typeof current !== 'object' || !v1 || typeof v1 !== 'object' || Array.isArray(v1)) return { pruned: current, added: [] };
  const cur = current as Record<string, unknown>;
  const old = v1 as Record<string, unknown>;
  const added: { path: string; required: boolean }[] = [];
  const pruned: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(cur)) {
    // A new value of a closed set (a rejection reason) is an addition too; v1's values must all still be there.
    if (key === 'enum' && Array.isArray(value) && Array.isArray(old.enum)) {
      pruned[key] = value.filter((v) => (old.enum as unknown[]).includes(v));
      for (const v of value.filter((v) => !(old.enum as unknown[]).includes(v))) added.push({ path: `${path}.enum(${String(v)})`, required: false });
      continue;
    }
    if (key === 'properties' && value && typeof value === 'object' && old.properties && typeof old.properties === 'object') {
      const props: Record<string, unknown> = {};
      for (const [name, schema] of Object.entries(value as Record<string, unknown>)) {
        const before = (old.properties as Record<string, unknown>)[name];
        if (before === undefined) {
          added.push({ path: `${path}.${name}`, required: Array.isArray(cur.required) && cur.required.includes(name) });
          continue;
        }
        const inner = withoutAdditions(schema, before, `${path}.${name}`);
        props[name] = inner.pruned;
        added.push(...inner.added);
      }
      pruned[key] = props;
    } else {
      const inner = withoutAdditions(value, old[key], `${path}.${key}`);
      pruned[key] = inner.pruned;
      added.push(...inner.added);
    }
  }
  return { pruned, added };
}

/**
 * eval.start loosened two rules in a compatible way (checked by the test that runs v1's starts through
 * both): `suite` is no longer required, and a dataset is a third way to name the cases beside
 * `case_ids` and `cases`. For the structural comparison it takes v1's `required` and case rule back.
 */
function withV1CaseRule(current: Record<string, unknown>, v1: Record<string, unknown>): Record<string, unknown> {
  // `allOf` and `dependencies` constrain only the new fields (solver, scorers, dataset) against each other.
  const rest = Object.fromEntries(Object.entries(current).filter(([key]) => !['anyOf', 'not', 'required', 'allOf', 'dependencies'].includes(key)));
  return { ...rest, required: v1.required, oneOf: v1.oneOf };
}

/** The payloads whose `goal` was widened since version 1 (500 to 8,000 characters, issue 36). */
const GOAL_WIDENED = ['agent.start', 'agent.change_goal', 'agent.fork'];

describe('the catalogue keeps the version 1 wire', () => {
  // The schemas as they were written by hand before the catalogue. The generated ones may only have
  // grown: every v1 property as it was, and each property added since optional.
  const v1 = JSON.parse(readFileSync(join(__dirname, '__fixtures__/v1-schemas.json'), 'utf8')) as Record<string, unknown>;

  it.each([
    ['COMMAND_ENVELOPE_SCHEMA', COMMAND_ENVELOPE_SCHEMA],
    ['COMMAND_PAYLOAD_SCHEMAS', COMMAND_PAYLOAD_SCHEMAS],
    ['COMMAND_OUTCOME_SCHEMA', COMMAND_OUTCOME_SCHEMA],
    ['DLQ_RECORD_SCHEMA', DLQ_RECORD_SCHEMA],
    ['RUN_EVENT_SCHEMA', RUN_EVENT_SCHEMA],
    ['AGENT_STATE_SCHEMA', AGENT_STATE_SCHEMA],
  ])('%s is the version 1 JSON Schema, with only optional properties added', (name, schema) => {
    const current = plainSchema(schema) as Record<string, Record<string, unknown>>;
    if (name === 'COMMAND_PAYLOAD_SCHEMAS') {
      current['eval.start'] = withV1CaseRule(current['eval.start'], (v1[name] as Record<string, Record<string, unknown>>)['eval.start']);
      // Widened since version 1 (the test below): compared here as version 1 wrote it.
      for (const type of GOAL_WIDENED) (current[type].properties as Record<string, { maxLength: number }>).goal.maxLength = 500;
      // A command type added since version 1 (agent.raise_budget) is an addition: a reader of version 1 never sends it.
      for (const type of Object.keys(current)) if (!Object.hasOwn(v1[name] as object, type)) delete current[type];
    }
    const { pruned, added } = withoutAdditions(current, v1[name]);
    expect(pruned).toEqual(v1[name]);
    expect(added.filter((a) => a.required)).toEqual([]);
  });

  it('eval.start only grew: every start version 1 took is still taken, and what it refused for its cases still is', () => {
    const ajv = new Ajv({ strict: false });
    const before = ajv.compile((v1.COMMAND_PAYLOAD_SCHEMAS as Record<string, object>)['eval.start']);
    const after = ajv.compile(plainSchema(COMMAND_PAYLOAD_SCHEMAS['eval.start']) as object);
    const starts = [
      { model: 'm', suite: 's', cases: 3 },
      { model: 'm', suite: 's', case_ids: ['a', 'b'], fail_fraction: 0.5, reviewers: ['alice'] },
      { model: 'm', suite: 's', cases: 3, case_ids: ['a'] },
      { model: 'm', suite: 's' },
      { model: 'm', suite: 's', cases: 0 },
    ];
    const takenBefore = starts.filter((start) => before(start));
    expect(takenBefore.length).toBeGreaterThan(0);
    expect(takenBefore.filter((start) => !after(start))).toEqual([]);
    // Both ways of naming cases at once, or none, are still refused.
    expect(after(starts[2])).toBe(false);
    expect(after(starts[3])).toBe(false);
    // What is new: a dataset names the cases, and the suite label is optional with it.
    expect(after({ model: 'm', dataset: { name: 'qa' } })).toBe(true);
  });

  it('a goal was widened from 500 to 8,000 characters, and only widened', () => {
    const ajv = new Ajv({ strict: false });
    for (const type of GOAL_WIDENED) {
      const goalOf = (schema: unknown) => (schema as { properties: { goal: object } }).properties.goal;
      const before = ajv.compile(goalOf((v1.COMMAND_PAYLOAD_SCHEMAS as Record<string, object>)[type]));
      const after = ajv.compile(goalOf(plainSchema(COMMAND_PAYLOAD_SCHEMAS[type as keyof typeof COMMAND_PAYLOAD_SCHEMAS])));
      const goals = ['a', 'x'.repeat(500), '😀'.repeat(500), 'x'.repeat(501), 'x'.repeat(8_000), 'x'.repeat(8_001), '', '   '];
      expect({ type, before: goals.map((g) => before(g)), after: goals.map((g) => after(g)) }).toEqual({
        type,
        before: [true, true, true, false, false, false, false, false],
        after: [true, true, true, true, true, false, false, false],
      });
    }
  });

  it('sees an added property, and refuses a required one', () => {
    const before = { type: 'object', properties: { a: { type: 'string' } }, required: ['a'] };
    expect(withoutAdditions({ ...before, properties: { ...before.properties, b: { type: 'string' } } }, before)).toEqual({ pruned: before, added: [{ path: '$.b', required: false }] });
    expect(withoutAdditions({ ...before, properties: { ...before.properties, b: { type: 'string' } }, required: ['a', 'b'] }, before).added).toEqual([{ path: '$.b', required: true }]);
    expect(withoutAdditions({ ...before, properties: { a: { type: 'integer' } } }, before).pruned).not.toEqual(before);
  });
});

describe('run event payloads by type', () => {
  const state = { status: 'running', goal: 'g', step: 1, max_steps: 8, policy: 'scripted', tier: 'batch' } as const;
  const envelope = { run_id: 'r', org: 'o', kind: 'agent', seq: 2, ts: '2026-12-01T00:00:00.000Z' } as const;

  it('accepts what the agent workflow emits for a step and refuses a step without its number', () => {
    const event: RunEvent = { ...envelope, type: 'step_completed', payload: { step: 0, kind: 'tool', tool: 'search', lane: 'cpu-tools', attempt: 1, duplicate: false, output: 'ok', state } };
    expect(runEventPayloadProblem(event)).toBeUndefined();
    expect(runEventPayloadProblem({ type: 'step_completed', payload: { kind: 'llm', attempt: 1, duplicate: false, output: '', state } })).toMatch(/step/);
  });

  it("names what is wrong with a state by the event's kind, not by the other kind's state it fits less", () => {
    // A type both kinds publish: an agent state without its goal was reported as a status that is not an eval status.
    const withoutGoal: Record<string, unknown> = { ...state, status: 'done' };
    delete withoutGoal.goal;
    expect(runEventPayloadProblem({ ...envelope, type: 'status_changed', payload: { state: withoutGoal } as never })).toBe("payload.state must have required property 'goal'");
    expect(runEventPayloadProblem({ ...envelope, kind: 'eval', type: 'status_changed', payload: { state: { ...state, status: 'running' } } })).toMatch(/payload.state must have required property '(model|suite)'/);
  });

  it('says nothing about a type it does not know, and keeps the reserved tool_called', () => {
    expect(runEventPayloadProblem({ type: 'something_new', payload: {} })).toBeUndefined();
    expect(RUN_EVENT_TYPES).toContain('tool_called');
  });

  it('a run-state record reads back, and one with a bad seq or status is refused', () => {
    const record = { org: 'o', run_id: 'r', kind: 'agent', seq: 2, type: 'status_changed', status: 'running', ts: envelope.ts, state };
    expect(readRunStateRecord(Buffer.from(JSON.stringify(record)))).toEqual({ ok: true, record });
    expect(readRunStateRecord(Buffer.from(JSON.stringify({ ...record, seq: 0 })))).toMatchObject({ ok: false, detail: expect.stringMatching(/seq/) });
    expect(readRunStateRecord(Buffer.from(JSON.stringify({ ...record, status: 'sleeping' })))).toMatchObject({ ok: false, detail: expect.stringMatching(/status/) });
  });
});

describe('the tool catalogue', () => {
  it('names each tool once with its lane, and offers it to a model with its arguments', () => {
    expect(TOOL_LANES).toEqual({ search: 'cpu', parse: 'cpu', fetch: 'cpu', embed: 'gpu', vision: 'gpu', rerank: 'gpu' });
    expect(toolsOnLane('gpu')).toEqual(['embed', 'vision', 'rerank']);
    expect(toolFunctionSpec('rerank')).toEqual({
      type: 'function',
      function: {
        name: 'rerank',
        description: TOOL_CATALOGUE.rerank.description,
        parameters: { type: 'object', properties: { query: { type: 'string' }, k: { type: 'integer', minimum: 1, maximum: 50 } }, required: ['query'], additionalProperties: false },
      },
    });
  });
});

describe('building a command before sending it', () => {
  it('gives a record keyed by run id whose value the consumer reads as the same command', () => {
    const built = buildCommand('agent.start', { org: 'acme', run_id: 'agent-1', command_id: 'c-1', payload: { goal: 'find the bug' } });
    expect(built.key).toBe('agent-1');
    expect(JSON.parse(built.value)).toEqual({ command_id: 'c-1', type: 'agent.start', org: 'acme', run_id: 'agent-1', payload: { goal: 'find the bug' } });
    expect(buildCommand('agent.pause', { org: 'acme', run_id: 'agent-1', payload: {} }).command.command_id).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('names the org lowercased, as the consumer will read it', () => {
    const built = buildCommand('agent.pause', { org: 'ACME', run_id: 'agent-1', command_id: 'c-1', payload: {} });
    expect(built.command.org).toBe('acme');
    expect(JSON.parse(built.value)).toEqual({ command_id: 'c-1', type: 'agent.pause', org: 'acme', run_id: 'agent-1', payload: {} });
  });

  it('throws, naming the field, for what the consumer would refuse', () => {
    const refused = (() => {
      try {
        buildCommand('agent.start', { org: 'acme', run_id: 'agent-1', payload: { goal: '' } });
      } catch (err) {
        return err;
      }
    })();
    expect(refused).toBeInstanceOf(CommandBuildError);
    expect(refused).toMatchObject({ reason: 'invalid_payload', message: expect.stringMatching(/^payload.goal must NOT have fewer than 1 characters/) });
    expect(() => buildCommand('agent.pause', { org: 'a/b', run_id: 'agent-1', payload: {} })).toThrow(/org/);
    expect(() => buildCommand('agent.inject_context', { org: 'acme', run_id: 'r', payload: { text: 'x'.repeat(70_000) } })).toThrow(expect.objectContaining({ reason: 'too_large' }));
  });
});
