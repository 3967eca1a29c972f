import { ConfigError } from '@agentrun/config';
import { loadOrchestratorConfig } from './config';

describe('ORCHESTRATOR_ROLES', () => {
  it('runs every role by default, and any subset when named', () => {
    expect([...loadOrchestratorConfig({}).ORCHESTRATOR_ROLES]).toEqual(['commands', 'workflows', 'cpu-tools']);
    expect([...loadOrchestratorConfig({ ORCHESTRATOR_ROLES: 'cpu-tools, workflows' }).ORCHESTRATOR_ROLES]).toEqual(['cpu-tools', 'workflows']);
  });

  it('refuses a role it does not know, naming it and the known ones', () => {
    expect(() => loadOrchestratorConfig({ ORCHESTRATOR_ROLES: 'commands,gpu-tools' })).toThrow(ConfigError);
    expect(() => loadOrchestratorConfig({ ORCHESTRATOR_ROLES: 'commands,gpu-tools' })).toThrow(
      "ORCHESTRATOR_ROLES must name roles among commands, workflows, cpu-tools, got 'gpu-tools'",
    );
  });
});
