import { AgentRunMetrics } from '@agentrun/telemetry';
import { countDecision } from './command-consumer';

describe('agentrun_commands_total', () => {
  it('counts each decision by type, outcome and reason, an empty reason when none, and any type outside the catalogue as unknown', async () => {
    const metrics = new AgentRunMetrics();
    countDecision({ type: 'agent.start', outcome: 'accepted' }, metrics);
    countDecision({ type: 'agent.start', outcome: 'duplicate' }, metrics);
    countDecision({ type: 'agent.pause', outcome: 'rejected', reason: 'unknown_run' }, metrics);
    countDecision({ type: 'agent.teleport-7f3a', outcome: 'rejected', reason: 'unknown_type' }, metrics);
    countDecision({ type: '', outcome: 'rejected', reason: 'unauthorized' }, metrics);
    const lines = (await metrics.registry.metrics()).split('\n').filter((l) => l.startsWith('agentrun_commands_total{'));
    expect(lines.sort()).toEqual([
      'agentrun_commands_total{type="agent.pause",outcome="rejected",reason="unknown_run"} 1',
      'agentrun_commands_total{type="agent.start",outcome="accepted",reason=""} 1',
      'agentrun_commands_total{type="agent.start",outcome="duplicate",reason=""} 1',
      'agentrun_commands_total{type="unknown",outcome="rejected",reason="unauthorized"} 1',
      'agentrun_commands_total{type="unknown",outcome="rejected",reason="unknown_type"} 1',
    ]);
  });
});
