import { activityLogContext } from './activity-log-context';

describe('activityLogContext', () => {
  it('takes the run from the input when it carries one, else from the workflow id', () => {
    expect(activityLogContext('acme/run-1', [{ org: 'acme', run_id: 'run-1', step: 3 }])).toEqual({ org: 'acme', run_id: 'run-1', command_id: undefined });
    expect(activityLogContext('acme/run-1/research/2', [{ question: 'q' }])).toEqual({ org: 'acme', run_id: 'run-1', command_id: undefined });
    expect(activityLogContext('acme/run-1', [{ org: 'acme', run_id: 'child-9', command_id: 'c-1' }])).toEqual({ org: 'acme', run_id: 'child-9', command_id: 'c-1' });
    expect(activityLogContext(undefined, ['text', 2])).toEqual({ org: undefined, run_id: undefined, command_id: undefined });
  });
});
