import type { AgentRunInput, RestoreResult } from './agent-run.types';
import { validateGoalChange } from './agent-run.handlers';
import { addUsage, AgentLoopState, DEFAULT_HISTORY_BUDGET } from './agent-run.state';

const lanes = { agentWorkflows: 'wf', cpuTools: 'cpu', gpuTools: 'gpu' };
const input: AgentRunInput = { org: 'acme', run_id: 'r1', goal: 'find the bug', max_steps: 40, policy: 'scripted', tier: 'team', lanes, steps_per_execution: 10 };
const quiet = { continueAsNewSuggested: false, historyLength: 10, historySize: 1_000 };
const outcome = { output: 'found', attempt: 2, duplicate: true, tool: 'search', lane: 'cpu' };

describe('the AgentRun state', () => {
  it('starts queued at step 0 toward its goal, with nothing carried', () => {
    const run = new AgentLoopState(input, 'acme/r1');
    expect(run.result(0)).toEqual({ status: 'queued', steps: 0, attempts: 0, duplicates_suppressed: 0, last_seq: 0 });
    expect(run.nextStep()).toEqual({ kind: 'llm', prompt: 'step 0: plan the next move toward: find the bug' });
  });

  it('an execution started from the carry goes on where the last one handed over', () => {
    const first = new AgentLoopState(input, 'acme/r1');
    first.status = 'running';
    first.firstTime('c1');
    first.recordStep('tool', outcome);
    first.noteChild('acme/r1/research/3');
    const carry = first.carry(7, undefined);
    const next = new AgentLoopState({ ...input, carry }, 'acme/r1');
    expect(next.carry(7, undefined)).toEqual(carry);
    expect(next.firstSeq).toBe(7);
    expect(next.firstTime('c1')).toBe(false);
    expect(next.result(7)).toEqual({ status: 'running', steps: 1, attempts: 1, duplicates_suppressed: 1, last_seq: 7 });
  });

  it("adds up its model calls' usage, shows it in its state and carries it across continue-as-new", () => {
    const run = new AgentLoopState(input, 'acme/r1');
    expect(run.view(0).usage).toBeUndefined();
    run.recordStep('llm', { ...outcome, usage: { model: 'm', prompt_tokens: 100, completion_tokens: 20, cost_usd: 0.0006, priced: true } });
    run.recordStep('tool', outcome);
    run.recordStep('llm', { ...outcome, usage: { model: 'm', prompt_tokens: 7, completion_tokens: 3, cost_usd: 0.0000003, priced: true, estimated: true } });
    const usage = { calls: 2, prompt_tokens: 107, completion_tokens: 23, cost_usd: 0.0006003, estimated_calls: 1 };
    expect(run.view(0).usage).toEqual(usage);
    const next = new AgentLoopState({ ...input, carry: run.carry(9, undefined) }, 'acme/r1');
    expect(next.view(0).usage).toEqual(usage);
    // A fork's usage is its own: the snapshot's state does not bring its parent's.
    expect(run.forkState()).not.toHaveProperty('usage');
    expect(addUsage(undefined, { model: 'm', prompt_tokens: 1, completion_tokens: 1, cost_usd: 0.1, priced: true }).cost_usd).toBe(0.1);
    expect(addUsage({ ...usage, cost_usd: 0.1 }, { model: 'm', prompt_tokens: 1, completion_tokens: 1, cost_usd: 0.2, priced: true }).cost_usd).toBe(0.3);
  });

  it("hands over at the step budget or the history budget, never on an execution's first step", () => {
    const run = new AgentLoopState({ ...input, steps_per_execution: 2 }, 'acme/r1');
    expect(run.dueForHandOver({ ...quiet, continueAsNewSuggested: true })).toBe(false);
    run.recordStep('llm', outcome);
    expect(run.dueForHandOver(quiet)).toBe(false);
    expect(run.dueForHandOver({ ...quiet, historyLength: DEFAULT_HISTORY_BUDGET.events })).toBe(true);
    run.recordStep('llm', outcome);
    expect(run.dueForHandOver(quiet)).toBe(true);
  });

  it("a fork reuses its parent's key for a call the parent recorded, and only then", () => {
    const fork = { from_run_id: 'r0', from_workflow_id: 'acme/r0', snapshot_id: 'snap-0001' };
    const run = new AgentLoopState({ ...input, fork, carry: { ...new AgentLoopState(input, 'acme/r1').carry(0, undefined), reusable_keys: ['acme/r0:1:abc'] } }, 'acme/r1');
    expect(run.reuseKeyFor('acme/r1:1:abc')).toBe('acme/r0:1:abc');
    expect(run.reuseKeyFor('acme/r1:2:abc')).toBeUndefined();
    expect(new AgentLoopState(input, 'acme/r1').reuseKeyFor('acme/r1:1:abc')).toBeUndefined();
  });

  it('a fork with a goal of its own notes the change and reuses nothing its parent recorded', () => {
    const restored = (): RestoreResult => ({
      state: { step: 4, goal: 'old goal', context: 'ctx', attempts: 1, duplicates_suppressed: 0, max_steps: 40, policy: 'scripted', tier: 'team', children: [] },
      reusable_keys: ['acme/r0:1:abc'],
      files: 1,
      bytes: 10,
    });
    const fork = { from_run_id: 'r0', from_workflow_id: 'acme/r0', snapshot_id: 'snap-0001' };
    const same = new AgentLoopState({ ...input, fork }, 'acme/r1');
    same.adoptSnapshot(restored());
    expect({ step: same.step, goal: same.goal, context: same.context, reusable: [...same.reusable] }).toEqual({ step: 4, goal: 'old goal', context: 'ctx', reusable: ['acme/r0:1:abc'] });
    const renamed = new AgentLoopState({ ...input, fork: { ...fork, goal: 'new goal' } }, 'acme/r1');
    renamed.adoptSnapshot(restored());
    expect({ goal: renamed.goal, context: renamed.context, reusable: renamed.reusable.size, started: renamed.executionStartedAtStep }).toEqual({
      goal: 'new goal',
      context: 'ctx\n[goal changed: new goal]',
      reusable: 0,
      started: 4,
    });
  });
});

describe('the change-goal validator', () => {
  const running = { settling: () => false, status: 'running' as const };

  it('counts code points as the boundary does: 8,000 emoji are a goal, 8,001 are not', () => {
    expect(() => validateGoalChange(running, { command_id: 'c', goal: '\u{1F600}'.repeat(8_000) })).not.toThrow();
    expect(() => validateGoalChange(running, { command_id: 'c', goal: '\u{1F600}'.repeat(8_001) })).toThrow('at most 8000');
  });

  it('refuses an empty goal, a missing command id, and any change once the run is settling', () => {
    expect(() => validateGoalChange(running, { command_id: 'c', goal: '  ' })).toThrow('must not be empty');
    expect(() => validateGoalChange(running, { command_id: '', goal: 'g' })).toThrow('command_id is required');
    expect(() => validateGoalChange({ settling: () => true, status: 'cancelling' }, { command_id: 'c', goal: 'g' })).toThrow('the run is cancelling');
  });
});
