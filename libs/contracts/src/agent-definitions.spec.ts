import Ajv from 'ajv';
import { AGENT_DEFINITION_SCHEMA, agentDefinitionProblem, isBuiltinAgentName, normaliseAgentDefinition, type AgentDefinition } from './agent-definitions';
import { plainSchema } from './schema';

const valid: AgentDefinition = { instructions: 'Fix the failing test.', model: 'scripted', tools: ['read_file', { name: 'exec', timeout_s: 60 }], max_steps: 12 };
const check = new Ajv({ strict: false, allErrors: true }).compile(plainSchema(AGENT_DEFINITION_SCHEMA) as object);

describe('agent definitions', () => {
  it('the schema takes a definition with its optional fields, and refuses what it does not know', () => {
    expect(check(valid)).toBe(true);
    expect(check({ ...valid, model_endpoint: 'local', temperature: 0.2, max_tokens: 512 })).toBe(true);
    expect(check({ ...valid, colour: 'red' })).toBe(false);
    expect(check({ ...valid, max_steps: 0 })).toBe(false);
    expect(check({ ...valid, temperature: 2.5 })).toBe(false);
    expect(check({ ...valid, tools: ['Exec'] })).toBe(false);
    expect(check({ ...valid, tools: [{ timeout_s: 1 }] })).toBe(false);
    expect(check(Object.fromEntries(Object.entries(valid).filter(([key]) => key !== 'model')))).toBe(false);
    // Instructions are counted in code points: 32,000 emoji are instructions, 32,001 are not.
    expect(check({ ...valid, instructions: '😀'.repeat(32_000) })).toBe(true);
    expect(check({ ...valid, instructions: '😀'.repeat(32_001) })).toBe(false);
  });

  it('normalises: the default endpoint filled in, every tool an object, absent sampling settings left absent', () => {
    expect(normaliseAgentDefinition(valid)).toEqual({
      instructions: 'Fix the failing test.',
      model: 'scripted',
      model_endpoint: 'default',
      tools: [{ name: 'read_file' }, { name: 'exec', timeout_s: 60 }],
      max_steps: 12,
    });
    expect(normaliseAgentDefinition({ ...valid, tools: [{ name: 'read_file' }, { timeout_s: 60, name: 'exec' }], model_endpoint: 'default' })).toEqual(normaliseAgentDefinition(valid));
    expect(normaliseAgentDefinition({ ...valid, temperature: 0 })).toMatchObject({ temperature: 0 });
  });

  it('names an unknown tool with the tools there are, a tool offered twice, and nothing when all is well', () => {
    const known = ['read_file', 'write_file', 'exec'];
    expect(agentDefinitionProblem(normaliseAgentDefinition(valid), known)).toBeUndefined();
    expect(agentDefinitionProblem(normaliseAgentDefinition({ ...valid, tools: ['read_file', 'teleport', 'fly'] }), known)).toBe(
      "unknown tools 'teleport', 'fly'; the tools there are: read_file, write_file, exec",
    );
    expect(agentDefinitionProblem(normaliseAgentDefinition({ ...valid, tools: ['exec', { name: 'exec', timeout_s: 5 }] }), known)).toBe("tool 'exec' is offered twice");
  });

  it('keeps builtin.* names for the platform', () => {
    expect([isBuiltinAgentName('builtin.llm'), isBuiltinAgentName('builtin-llm'), isBuiltinAgentName('my.builtin')]).toEqual([true, false, false]);
  });
});
