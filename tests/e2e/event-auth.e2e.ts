/**
 * Issue 16, finding 1: anyone who could write to the run-events topic rewrote any run's read model (a
 * forged `status_changed` at seq 99999 made `GET /runs/{id}` answer failed, goal pwned, last_seq 99999).
 * Now the projector takes only events signed with a key it accepts, and a run moves only along its
 * contiguous seq prefix. The platform runs with keys of its own (two, as during a rotation), so the
 * development key is as foreign here as any other.
 */
import { randomBytes } from 'node:crypto';
import { TOPICS, type DlqRecord, type RunEventEnvelope } from '@agentrun/contracts';
import { DEVELOPMENT_EVENT_KEY } from '@agentrun/config';
import { EVENT_KEY_ID_HEADER, EventVerifier } from '@agentrun/kafka';
import { Platform, uniqueId, type TopicRecord } from '../support/platform';
import { waitFor } from '../support/wait';

const current = { kid: 'e2e-2026b', secret: Buffer.from(randomBytes(32).toString('hex')) };
const previous = { kid: 'e2e-2026a', secret: Buffer.from(randomBytes(32).toString('hex')) };
const keyList = [current, previous].map((k) => `${k.kid}:${k.secret.toString()}`).join(',');

describe('authenticated run events and the contiguous seq prefix', () => {
  const platform = new Platform({ AGENTRUN_EVENT_KEYS: keyList, TOOL_PACE_TICKS: '3', TOOL_PACE_MS: '200' });
  const org = uniqueId('evauth');
  const finished = uniqueId('done');
  let events: TopicRecord<RunEventEnvelope>[];
  let dlq: TopicRecord<DlqRecord>[];

  const getRun = async (runId: string) => {
    const answer = await platform.http('GET', `/runs/${runId}`, { org });
    expect(answer.status).toBe(200);
    return answer.body;
  };
  const storedSeqs = async (runId: string) =>
    (await platform.query<{ seq: number }>('SELECT seq FROM run_events WHERE org = $1 AND run_id = $2 ORDER BY seq', [org, runId])).map((r) => Number(r.seq));
  /** The finding's event: a terminal run rewritten to failed, goal pwned, seq 99999. */
  const forged = (runId: string, seq = 99_999, goal = 'pwned'): string =>
    JSON.stringify({
      run_id: runId,
      org,
      kind: 'agent',
      seq,
      type: 'status_changed',
      ts: new Date().toISOString(),
      payload: { state: { status: 'failed', goal, step: 0, max_steps: 4, policy: 'scripted', tier: 'batch' } },
    });
  const dlqOf = (value: string) => waitFor(`the DLQ record of ${value.slice(0, 60)}...`, () => dlq.find((r) => r.value.original_base64 === Buffer.from(value).toString('base64')), 30_000);

  beforeAll(async () => {
    await platform.start();
    events = await platform.follow<RunEventEnvelope>(TOPICS.runEvents);
    dlq = await platform.follow<DlqRecord>(TOPICS.runEventsDlq);
    await platform.publishCommand({ command_id: uniqueId('c'), type: 'agent.start', org, run_id: finished, payload: { goal: 'summarise the workspace', max_steps: 2 } });
    await platform.waitForStatus(org, finished, 'done');
  });
  afterAll(() => platform.stop());

  it('(d) a run started normally is published signed, verified and projected: every event carries a valid signature of the current key', async () => {
    const run = await getRun(finished);
    expect(run).toMatchObject({ status: 'done', state: { goal: 'summarise the workspace' } });
    const published = await waitFor('the run\'s events on the topic', () => {
      const mine = events.filter((e) => e.key === finished);
      return mine.length >= run.last_seq && mine;
    });
    const verifier = new EventVerifier([current, previous]);
    for (const record of published) {
      expect({ seq: record.value.seq, kid: record.headers[EVENT_KEY_ID_HEADER] }).toEqual({ seq: record.value.seq, kid: current.kid });
      expect(verifier.verify(record.bytes, record.headers)).toEqual({ ok: true, kid: current.kid });
    }
    expect(await storedSeqs(finished)).toEqual(Array.from({ length: run.last_seq }, (_, i) => i + 1));
  });

  it('(a) the finding\'s forged event, unsigned, goes to the DLQ as unsigned; the run answers as before and nothing of it is stored', async () => {
    const before = await getRun(finished);
    // A run in flight beside it must not notice.
    const inFlight = uniqueId('inflight');
    await platform.publishCommand({ command_id: uniqueId('c'), type: 'agent.start', org, run_id: inFlight, payload: { goal: 'keep going', max_steps: 3 } });
    await waitFor('the run in flight projected', async () => (await storedSeqs(inFlight)).length > 0, 30_000);

    const value = forged(finished);
    await platform.publishRunEvents([{ key: finished, value }], null);
    const record = await dlqOf(value);
    expect(record.value).toMatchObject({ reason: 'unsigned', detail: expect.stringContaining(EVENT_KEY_ID_HEADER), source: { topic: platform.topic(TOPICS.runEvents) } });
    expect(record.key).toBe(finished);

    expect(await getRun(finished)).toEqual(before);
    expect(before).toMatchObject({ status: 'done', state: { goal: 'summarise the workspace' } });
    expect(await storedSeqs(finished)).not.toContain(99_999);
    await platform.waitForStatus(org, inFlight, 'done');
    const seqs = await storedSeqs(inFlight);
    expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => i + 1));
  });

  it('(b) the same event signed with a key the projector does not hold, or with a wrong secret under a real key id, goes to the DLQ; nothing stored', async () => {
    const before = await getRun(finished);
    const attempts = [
      { key: { kid: 'attacker', secret: Buffer.from('x'.repeat(64)) }, reason: 'unknown_key', detail: /'attacker'/ },
      // The development key every checkout has: not accepted once keys are configured.
      { key: DEVELOPMENT_EVENT_KEY, reason: 'unknown_key', detail: /'dev'/ },
      { key: { kid: current.kid, secret: Buffer.from(randomBytes(32).toString('hex')) }, reason: 'bad_signature', detail: new RegExp(`key '${current.kid}'`) },
    ];
    for (const [i, attempt] of attempts.entries()) {
      const value = forged(finished, 99_999 - i, `pwned ${i}`);
      await platform.publishRunEvents([{ key: finished, value }], attempt.key);
      const record = await dlqOf(value);
      expect({ i, reason: record.value.reason }).toEqual({ i, reason: attempt.reason });
      expect(record.value.detail).toMatch(attempt.detail);
      // No key material in the record.
      for (const k of [current, previous, attempt.key]) expect(JSON.stringify(record.value)).not.toContain(k.secret.toString());
    }
    expect(await getRun(finished)).toEqual(before);
    expect((await storedSeqs(finished)).filter((s) => s > before.last_seq)).toEqual([]);
  });

  it('(c) a validly signed event past a gap is stored but moves nothing; when the gap\'s event arrives, the run advances through both', async () => {
    const before = await getRun(finished);
    const gap = before.last_seq + 1;
    const past = forged(finished, gap + 1, 'past the gap');
    // Signed with the previous key: during a rotation the projector accepts both.
    await platform.publishRunEvents([{ key: finished, value: past }], previous);
    await waitFor('the event past the gap stored', async () => (await storedSeqs(finished)).includes(gap + 1), 30_000);
    expect(await getRun(finished)).toEqual(before);
    const sse = await platform.http('GET', `/runs/${finished}/events`, { org });
    expect(sse.status).toBe(200);
    expect(String(sse.body)).not.toContain('past the gap');

    await platform.publishRunEvents([{ key: finished, value: forged(finished, gap, 'the gap filled') }]);
    const after = await waitFor('the run past the filled gap', async () => {
      const run = await getRun(finished);
      return run.last_seq === gap + 1 && run;
    }, 30_000);
    expect(after).toMatchObject({ status: 'failed', last_seq: gap + 1, state: { goal: 'past the gap' } });
    expect(await storedSeqs(finished)).toEqual(Array.from({ length: gap + 1 }, (_, i) => i + 1));
  });
});
