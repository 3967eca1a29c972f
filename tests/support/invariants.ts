import type { RunEvent } from '@agentrun/contracts';
import type { TopicRecord } from './platform';

/** The distinct seqs of one run on a topic must be exactly 1..n (a retried publish may repeat one). */
export function seqsOnTopic(records: TopicRecord<RunEvent>[], org: string, runId: string): number[] {
  const seqs = new Set<number>();
  for (const r of records) if (r.value.org === org && r.value.run_id === runId) seqs.add(r.value.seq);
  return [...seqs].sort((a, b) => a - b);
}

export function oneToN(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i + 1);
}

/** A run's events, on the topic, must all sit in one partition (keyed by run id). */
export function partitionsOf(records: TopicRecord<RunEvent>[], org: string, runId: string): number[] {
  return [...new Set(records.filter((r) => r.value.org === org && r.value.run_id === runId).map((r) => r.partition))];
}
