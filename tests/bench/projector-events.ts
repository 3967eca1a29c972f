/**
 * The run events the projector benches apply: RUNS runs x SEQS seqs, shaped as the agent workflow's
 * outbox emits them (the whole state on each), interleaved over the topic's partitions as concurrent
 * runs publish, cut into per-partition batches taken in turn.
 */
import type { AgentRunState, RunEventEnvelope } from '@agentrun/contracts';
import { stackEnv } from '../support/stack-env';

export const SEQS = 100;
export const PARTITIONS = Number(stackEnv().KAFKA_TOPIC_PARTITIONS ?? 3);

/** A small deterministic PRNG, so every run of the bench applies the same events in the same order. */
export function prng(seed: number): () => number {
  let x = seed >>> 0;
  return () => {
    x = (x + 0x6d2b79f5) >>> 0;
    let t = x;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

const TOOLS = ['web_search', 'read_file', 'write_file', 'run_python', 'fetch_url'];

/** Event `seq` of a run, shaped as the agent workflow's outbox emits it: its extras plus the whole state. */
export function runEvent(org: string, runId: string, seq: number, baseMs: number): RunEventEnvelope {
  const last = seq === SEQS;
  const step = seq - 1;
  const state: AgentRunState = {
    status: last ? 'done' : 'running',
    goal: `Summarise the open issues of project ${runId} and draft a plan for the next release`,
    step,
    max_steps: SEQS - 1,
    policy: 'scripted',
    tier: 'batch',
    owner: 'orchestrator-1',
  };
  const ts = new Date(baseMs + seq * 1_000).toISOString();
  if (seq === 1) return { run_id: runId, org, kind: 'agent', seq, type: 'run_started', ts, payload: { state } };
  if (last) return { run_id: runId, org, kind: 'agent', seq, type: 'run_finished', ts, payload: { state } };
  const tool = TOOLS[seq % TOOLS.length];
  return {
    run_id: runId,
    org,
    kind: 'agent',
    seq,
    type: 'step_completed',
    ts,
    payload: {
      step: step - 1,
      kind: 'tool',
      tool,
      lane: 'agentrun-tools',
      attempt: 1,
      duplicate: false,
      output: `${tool} returned ${(seq * 7919) % 10_000} bytes: the search index lists twelve open issues, three of them release blockers.`,
      state,
    },
  };
}

/** The bench's events as batches: runs spread over partitions, interleaved within each, cut per partition. */
export function buildBatches(org: string, runs: number, batchSize: number, seed: number): RunEventEnvelope[][] {
  const random = prng(seed);
  const baseMs = Date.parse('2026-11-29T12:00:00.000Z');
  const perPartition: RunEventEnvelope[][][] = Array.from({ length: PARTITIONS }, () => []);
  for (let p = 0; p < PARTITIONS; p++) {
    const active = Array.from({ length: runs }, (_, i) => i).filter((i) => i % PARTITIONS === p);
    const next = new Map(active.map((i) => [i, 1]));
    const stream: RunEventEnvelope[] = [];
    while (active.length > 0) {
      const pick = Math.floor(random() * active.length);
      const run = active[pick];
      const seq = next.get(run)!;
      stream.push(runEvent(org, `run-${String(run).padStart(4, '0')}`, seq, baseMs + run * 37));
      if (seq === SEQS) active.splice(pick, 1);
      else next.set(run, seq + 1);
    }
    for (let i = 0; i < stream.length; i += batchSize) perPartition[p].push(stream.slice(i, i + batchSize));
  }
  const batches: RunEventEnvelope[][] = [];
  for (let round = 0; perPartition.some((list) => round < list.length); round++) {
    for (const list of perPartition) if (round < list.length) batches.push(list[round]);
  }
  return batches;
}

