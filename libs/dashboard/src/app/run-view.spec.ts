import type { RunEvent, SnapshotRow } from '@agentrun/contracts';
import { agentGauge, budgetText, describeEvent, EventLog, evalSummary, LiveReply, mergeSnapshots, spendText, splitLane, stepDurations } from './run-view';

const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
const ev = (seq: number, type: string, payload: Record<string, unknown> = {}, ts = at(seq)): RunEvent => ({
  run_id: 'r',
  org: 'o',
  kind: 'agent',
  seq,
  type,
  ts,
  payload,
});

describe('the run page model', () => {
  it('keeps each event once whatever the order and overlap of deliveries, and resumes after the contiguous prefix', () => {
    const log = new EventLog();
    expect(log.add([ev(1, 'run_started'), ev(2, 'step_completed')])).toBe(2);
    // A reconnect that resumes too early, and a reload that starts again from seq 1.
    expect(log.add([ev(2, 'step_completed'), ev(4, 'step_completed')])).toBe(1);
    expect(log.contiguousSeq()).toBe(2);
    expect(log.add([ev(1, 'run_started'), ev(2, 'step_completed'), ev(3, 'step_completed'), ev(4, 'step_completed')])).toBe(1);
    expect(log.events().map((e) => e.seq)).toEqual([1, 2, 3, 4]);
    expect(log.contiguousSeq()).toBe(4);
    expect(log.size).toBe(4);
  });

  it('the newest event with a state gives the state', () => {
    const log = new EventLog();
    log.add([ev(1, 'run_started', { state: { status: 'running' } }), ev(3, 'x'), ev(2, 'status_changed', { state: { status: 'paused' } })]);
    expect(log.latestState()?.status).toBe('paused');
  });

  it('step durations run from the previous boundary, per lane, and time paused is not a step', () => {
    const events = [
      ev(1, 'run_started', { state: { status: 'running' } }, at(0)),
      ev(2, 'step_completed', { step: 0, kind: 'llm' }, at(2)),
      ev(3, 'step_completed', { step: 1, kind: 'tool', tool: 'search', lane: 'cpu-tools' }, at(5)),
      ev(4, 'status_changed', { state: { status: 'paused' } }, at(6)),
      ev(5, 'status_changed', { state: { status: 'running' } }, at(60)),
      ev(6, 'step_completed', { step: 2, kind: 'tool', tool: 'embed', lane: 'gpu-tools' }, at(64)),
    ];
    expect(stepDurations(events)).toEqual([
      { step: 0, lane: 'model', label: 'llm', seconds: 2 },
      { step: 1, lane: 'cpu-tools', label: 'search', seconds: 3 },
      { step: 2, lane: 'gpu-tools', label: 'embed', seconds: 4 },
    ]);
  });

  it('a lane on a workspace host is charted as its lane, with the host kept apart', () => {
    expect(splitLane('cpu-tools@h1')).toEqual({ lane: 'cpu-tools', host: 'h1' });
    expect(splitLane('t-42-gpu-tools@host-2')).toEqual({ lane: 't-42-gpu-tools', host: 'host-2' });
    expect(splitLane('cpu-tools')).toEqual({ lane: 'cpu-tools' });
    expect(splitLane('model')).toEqual({ lane: 'model' });
    // A run whose workspace moved from h1 to h2: still one series per lane.
    const events = [
      ev(1, 'run_started', { state: { status: 'running' } }, at(0)),
      ev(2, 'step_completed', { step: 0, kind: 'tool', tool: 'search', lane: 'cpu-tools@h1' }, at(1)),
      ev(3, 'step_completed', { step: 1, kind: 'tool', tool: 'embed', lane: 'gpu-tools@h1' }, at(3)),
      ev(4, 'workspace_moved', { from: 'h1', to: 'h2', snapshot_id: 'snap-0001', steps_replayed: 1 }, at(10)),
      ev(5, 'step_completed', { step: 2, kind: 'tool', tool: 'search', lane: 'cpu-tools@h2' }, at(12)),
      ev(6, 'step_completed', { step: 3, kind: 'llm' }, at(13)),
    ];
    const steps = stepDurations(events);
    expect(steps).toEqual([
      { step: 0, lane: 'cpu-tools', host: 'h1', label: 'search', seconds: 1 },
      { step: 1, lane: 'gpu-tools', host: 'h1', label: 'embed', seconds: 2 },
      { step: 2, lane: 'cpu-tools', host: 'h2', label: 'search', seconds: 9 },
      { step: 3, lane: 'model', label: 'llm', seconds: 1 },
    ]);
    expect([...new Set(steps.map((s) => s.lane))]).toEqual(['cpu-tools', 'gpu-tools', 'model']);
    // The step's own line keeps the host.
    expect(describeEvent(events[4])).toBe('step 2 · search on cpu-tools@h2');
  });

  it('an eval state becomes a grid in case order, with the score so far', () => {
    const view = evalSummary({
      status: 'running',
      model: 'm-1',
      suite: 'smoke',
      total: 3,
      done: 2,
      counts: { ok: 1, failed: 1, ungraded: 0 },
      score: 0.4,
      reviewers: ['alice'],
      cases: { 'case-10': { status: 'running' }, 'case-2': { status: 'failed', score: 0, error_type: 'agent_error' }, 'case-1': { status: 'ok', score: 0.8, attempts: 2 } },
    });
    expect(view?.cases.map((c) => [c.case_id, c.status])).toEqual([
      ['case-1', 'ok'],
      ['case-2', 'failed'],
      ['case-10', 'running'],
    ]);
    expect(view).toMatchObject({ total: 3, done: 2, score: 0.4, reviewers: ['alice'] });
    expect(view?.dataset_id).toBeUndefined();
    // A real eval names its dataset and solver; the page compares it only with evals of the same dataset.
    const real = evalSummary({ status: 'awaiting_review', model: 'm', suite: 'qa', dataset_id: 'f'.repeat(64), solver: 'generate', cases: {} });
    expect(real).toMatchObject({ dataset_id: 'f'.repeat(64), solver: 'generate', total: 0, done: 0 });
    expect(evalSummary({ status: 'running', goal: 'not an eval' })).toBeUndefined();
  });

  it('the agent gauge shows history only when the state reports it', () => {
    expect(agentGauge({ status: 'running', goal: 'g', step: 3, max_steps: 8 })).toEqual({ goal: 'g', step: 3, max_steps: 8 });
    expect(agentGauge({ status: 'running', goal: 'g', step: 3, max_steps: 8, history_length: 500 })?.history).toEqual({ length: 500, budget: 2000 });
    const usage = { calls: 3, prompt_tokens: 3_900, completion_tokens: 310, cost_usd: 0.01234, estimated_calls: 0 };
    expect(agentGauge({ status: 'running', goal: 'g', step: 3, max_steps: 8, usage })?.spend).toBe('$0.0123 · 4,210 tokens (3,900 in, 310 out) in 3 model calls');
    expect(spendText({ ...usage, calls: 1, cost_usd: 12.5, estimated_calls: 1 })).toBe('$12.50 · 4,210 tokens (3,900 in, 310 out) in 1 model call, 1 estimated');
    expect(agentGauge({ status: 'paused', goal: 'g', step: 3, max_steps: 8, usage, budget: { max_tokens: 5_000, max_cost_usd: 1 } })?.budget).toBe('4,210 of 5,000 tokens (84%) · $0.0123 of $1.00 (1%)');
    expect(budgetText(undefined, { max_cost_usd: 0.5 })).toBe('$0.0000 of $0.5000 (0%)');
    const state = { status: 'paused' as const, goal: 'g', step: 3, max_steps: 8, policy: 'llm' as const, tier: 'batch' as const, budget: { max_tokens: 900 } };
    const base = { run_id: 'r', org: 'o', kind: 'agent' as const, seq: 9, ts: '2026-12-03T00:00:00Z' };
    expect(describeEvent({ ...base, type: 'budget_exhausted', payload: { step: 3, scope: 'run', limit: 'tokens', max: 300, spent: 80, reserved: 0, needed: 260, left: 220, state } })).toBe(
      "paused: step 3's model call needs up to 260 tokens, the run's budget has 220 tokens left (80 tokens of 300 tokens spent)",
    );
    expect(describeEvent({ ...base, type: 'budget_raised', payload: { command_id: 'c', previous: { max_tokens: 300 }, state } })).toBe('budget raised to 900 tokens');
  });

  it('snapshots from the API and from events are one row each', () => {
    const row = (id: string, t: number, status: SnapshotRow['capture_status'] = 'ok'): SnapshotRow => ({
      snapshot_id: id,
      is_final: false,
      capture_status: status,
      captured_at_utc: at(t),
      elapsed_s: t,
      step: t,
      source_agent_name: 'AgentRun',
      source_context_id: 'r',
    });
    const events = [ev(3, 'snapshot_captured', { snapshot: row('s-2', 2, 'partial') }), ev(4, 'snapshot_captured', { snapshot: row('s-3', 3) })];
    const merged = mergeSnapshots([row('s-1', 1), row('s-2', 2)], events);
    expect(merged.map((r) => [r.snapshot_id, r.capture_status])).toEqual([
      ['s-1', 'ok'],
      ['s-2', 'ok'],
      ['s-3', 'ok'],
    ]);
  });

  it('every event type reads as a line, unknown ones by their type', () => {
    expect(describeEvent(ev(1, 'step_completed', { step: 4, kind: 'tool', tool: 'embed', lane: 'gpu-tools', attempt: 2, duplicate: true }))).toBe(
      'step 4 · embed on gpu-tools · attempt 2 · duplicate (served from the ledger)',
    );
    expect(describeEvent(ev(1, 'case_finished', { case_id: 'c-1', status: 'ok', score: 0.5 }))).toBe('case c-1: ok, score 0.5');
    expect(describeEvent(ev(1, 'workspace_moved', { from: 'h1', to: 'h2', snapshot_id: 'snap-0003', steps_replayed: 2 }))).toBe(
      'workspace moved h1 → h2 from snap-0003, 2 steps replayed',
    );
    expect(describeEvent(ev(1, 'workspace_moved', { from: 'h1', to: 'h2', steps_replayed: 1 }))).toBe('workspace moved h1 → h2 (fresh workspace), 1 step replayed');
    expect(describeEvent(ev(1, 'something_new'))).toBe('something new');
  });

  it('the live reply: pieces in index order once each, a retry replaces the text, an older step or attempt is ignored', () => {
    const reply = new LiveReply();
    expect(reply.current()).toBeUndefined();
    expect(reply.add({ step: 2, attempt: 1, index: 1, delta: 'lo' })).toBe(true);
    expect(reply.add({ step: 2, attempt: 1, index: 0, delta: 'Hel' })).toBe(true);
    expect(reply.add({ step: 2, attempt: 1, index: 0, delta: 'Hel' })).toBe(false);
    expect(reply.current()).toEqual({ step: 2, attempt: 1, text: 'Hello' });
    expect(reply.add({ step: 2, attempt: 2, index: 0, delta: 'Hi' })).toBe(true);
    expect(reply.current()).toEqual({ step: 2, attempt: 2, text: 'Hi' });
    expect(reply.add({ step: 2, attempt: 1, index: 2, delta: '!' })).toBe(false);
    expect(reply.add({ step: 3, attempt: 1, index: 0, delta: 'Next' })).toBe(true);
    expect(reply.add({ step: 2, attempt: 3, index: 0, delta: 'late' })).toBe(false);
    expect(reply.current()).toEqual({ step: 3, attempt: 1, text: 'Next' });
  });
});
