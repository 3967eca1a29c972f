import { isForwardMove, isTerminal } from './statuses';
import { parseWorkflowId, workflowIdFor } from './names';

describe('statuses', () => {
  it('nothing leaves a terminal status and nothing returns to queued', () => {
    expect(isTerminal('done')).toBe(true);
    expect(isTerminal('running')).toBe(false);
    expect(isForwardMove('running', 'paused')).toBe(true);
    expect(isForwardMove('paused', 'running')).toBe(true);
    expect(isForwardMove('done', 'running')).toBe(false);
    expect(isForwardMove('cancelled', 'cancelled')).toBe(true);
    expect(isForwardMove('running', 'queued')).toBe(false);
  });
});

describe('workflow ids', () => {
  it('is {org}/{run_id} and splits back; child workflow ids are not runs', () => {
    expect(workflowIdFor('acme', 'agent-42')).toBe('acme/agent-42');
    expect(parseWorkflowId('acme/agent-42')).toEqual({ org: 'acme', runId: 'agent-42' });
    expect(parseWorkflowId('acme/agent-42/research/3')).toBeUndefined();
    expect(parseWorkflowId('no-slash')).toBeUndefined();
  });
});
