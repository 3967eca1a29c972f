import { normaliseAgentDefinition, type AgentDefinition } from '@agentrun/contracts';
import { agentDefinitionVersion } from './agent-definitions';

describe('an agent definition version', () => {
  const definition: AgentDefinition = { instructions: 'Fix the failing test.', model: 'scripted', tools: ['read_file', { name: 'exec', timeout_s: 60 }], max_steps: 12 };
  const version = agentDefinitionVersion(normaliseAgentDefinition(definition));

  it('is a sha256, the same however the definition is written', () => {
    expect(version).toMatch(/^[0-9a-f]{64}$/);
    const reordered = { max_steps: 12, tools: [{ name: 'read_file' }, { timeout_s: 60, name: 'exec' }], model_endpoint: 'default', model: 'scripted', instructions: 'Fix the failing test.' };
    expect(agentDefinitionVersion(normaliseAgentDefinition(reordered))).toBe(version);
  });

  it('changes with anything that changes what runs: the instructions, a tool option, the tools\' order, a sampling setting', () => {
    const variants: AgentDefinition[] = [
      { ...definition, instructions: 'Fix the failing test!' },
      { ...definition, tools: ['read_file', { name: 'exec', timeout_s: 61 }] },
      { ...definition, tools: [{ name: 'exec', timeout_s: 60 }, 'read_file'] },
      { ...definition, temperature: 0 },
      { ...definition, model_endpoint: 'local' },
      { ...definition, max_steps: 13 },
    ];
    const versions = variants.map((v) => agentDefinitionVersion(normaliseAgentDefinition(v)));
    expect(new Set([version, ...versions]).size).toBe(variants.length + 1);
  });
});
