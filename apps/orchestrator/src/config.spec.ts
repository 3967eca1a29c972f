import { ConfigError } from '@agentrun/config';
import { cpuToolsWithWorkflows, loadOrchestratorConfig, servesCpuToolsWithWorkflows } from './config';

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

describe('CPU tools on the workflow queue', () => {
  const of = (env: Record<string, string>) => loadOrchestratorConfig(env);

  it('puts the CPU lane of new runs there only in an all-roles process with the setting on', () => {
    expect(cpuToolsWithWorkflows(of({}))).toBe(true);
    expect(cpuToolsWithWorkflows(of({ AGENTRUN_CPU_TOOLS_WITH_WORKFLOWS: 'false' }))).toBe(false);
    expect(cpuToolsWithWorkflows(of({ ORCHESTRATOR_ROLES: 'workflows,cpu-tools' }))).toBe(false);
    expect(cpuToolsWithWorkflows(of({ ORCHESTRATOR_ROLES: 'commands,workflows' }))).toBe(false);
  });

  it('serves them there wherever workflows and CPU tools share a process, the setting on or off', () => {
    // Runs started while it was on keep agent-workflows as their CPU lane, through continue-as-new.
    expect(servesCpuToolsWithWorkflows(of({ AGENTRUN_CPU_TOOLS_WITH_WORKFLOWS: 'false' }))).toBe(true);
    expect(servesCpuToolsWithWorkflows(of({ ORCHESTRATOR_ROLES: 'workflows,cpu-tools' }))).toBe(true);
    expect(servesCpuToolsWithWorkflows(of({ ORCHESTRATOR_ROLES: 'commands,workflows' }))).toBe(false);
    expect(servesCpuToolsWithWorkflows(of({ ORCHESTRATOR_ROLES: 'cpu-tools' }))).toBe(false);
  });
});
