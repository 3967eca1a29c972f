import { TOPICS, type RunEventEnvelope } from '@agentrun/contracts';
import { oneToN, scriptedRunShape, seqsOnTopic } from './invariants';
import { Platform, type TopicRecord } from './platform';
import { waitFor } from './wait';

/** Checks of the files whose runs outlive a stopped service or server (resilience, stack-restart). */

/** The run's step in the read model (-1 before it is there). */
export async function stepOf(platform: Platform, org: string, runId: string): Promise<number> {
  const rows = await platform.query<{ step: number }>(`SELECT (state->>'step')::int AS step FROM runs WHERE org = $1 AND run_id = $2`, [org, runId]);
  return rows[0]?.step ?? -1;
}

/** After a fault: the run is done, and the topic and the read model hold exactly seqs 1..N. */
export async function expectComplete(platform: Platform, events: TopicRecord<RunEventEnvelope>[], org: string, runId: string, steps: number): Promise<void> {
  await platform.waitForStatus(org, runId, 'done', 180_000);
  const shape = scriptedRunShape(steps);
  const n = shape.events;
  await waitFor('every event on the topic', () => seqsOnTopic(events, org, runId).length === n, 60_000);
  expect(seqsOnTopic(events, org, runId)).toEqual(oneToN(n));
  const stored = await platform.query<{ seq: number }>('SELECT seq FROM run_events WHERE org = $1 AND run_id = $2 ORDER BY seq', [org, runId]);
  expect(stored.map((r) => r.seq)).toEqual(oneToN(n));
  const [row] = await platform.query<{ last_seq: number; status: string }>('SELECT last_seq, status FROM runs WHERE org = $1 AND run_id = $2', [org, runId]);
  expect(row).toEqual({ last_seq: n, status: 'done' });
  // Each model call and tool step happened once, whatever was retried; each sub-agent's call too.
  const [{ n: effects }] = await platform.query<{ n: string }>(
    `SELECT count(*) AS n FROM effect_ledger WHERE starts_with(idempotency_key, $1)`,
    [`${org}/${runId}:`],
  );
  expect(Number(effects)).toBe(shape.effects);
  const [{ n: research }] = await platform.query<{ n: string }>(
    `SELECT count(*) AS n FROM effect_ledger WHERE starts_with(idempotency_key, $1)`,
    [`${org}/${runId}/research/`],
  );
  expect(Number(research)).toBe(shape.research);
}

/**
 * A platform whose tools are paced (0.4 s each, about 8 s a 40-step run, so a fault lands while a run is
 * still going), started in `beforeAll` with the run-event topic followed, and stopped in `afterAll`.
 * `events()` is what the topic has held so far.
 */
export function pacedPlatformFollowingEvents(): { platform: Platform; events: () => TopicRecord<RunEventEnvelope>[] } {
  const platform = new Platform({ TOOL_PACE_TICKS: '4', TOOL_PACE_MS: '100' });
  let records: TopicRecord<RunEventEnvelope>[] = [];
  beforeAll(async () => {
    await platform.start();
    records = await platform.follow<RunEventEnvelope>(TOPICS.runEvents);
  });
  afterAll(() => platform.stop());
  return { platform, events: () => records };
}
