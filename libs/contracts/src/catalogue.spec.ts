import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { COMMAND_ENVELOPE_SCHEMA, COMMAND_PAYLOAD_SCHEMAS } from './commands';
import { AGENT_STATE_SCHEMA, RUN_EVENT_SCHEMA, RUN_EVENT_TYPES, type RunEvent } from './events';
import { COMMAND_OUTCOME_SCHEMA, DLQ_RECORD_SCHEMA } from './outcomes';
import { plainSchema } from './schema';
import { TOOL_CATALOGUE, toolFunctionSpec, TOOL_LANES, toolsOnLane } from './tools';
import { buildCommand, CommandBuildError, readRunStateRecord, runEventPayloadProblem } from './validation';

describe('the catalogue keeps the version 1 wire', () => {
  // The schemas as they were written by hand before the catalogue: the generated ones must be the same JSON.
  const v1 = JSON.parse(readFileSync(join(__dirname, '__fixtures__/v1-schemas.json'), 'utf8')) as Record<string, unknown>;

  it.each([
    ['COMMAND_ENVELOPE_SCHEMA', COMMAND_ENVELOPE_SCHEMA],
    ['COMMAND_PAYLOAD_SCHEMAS', COMMAND_PAYLOAD_SCHEMAS],
    ['COMMAND_OUTCOME_SCHEMA', COMMAND_OUTCOME_SCHEMA],
    ['DLQ_RECORD_SCHEMA', DLQ_RECORD_SCHEMA],
    ['RUN_EVENT_SCHEMA', RUN_EVENT_SCHEMA],
    ['AGENT_STATE_SCHEMA', AGENT_STATE_SCHEMA],
  ])('%s is the same JSON Schema as before', (name, schema) => {
    expect(plainSchema(schema)).toEqual(v1[name]);
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
