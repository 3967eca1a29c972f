import { TOPICS, type CommandOutcome } from '@agentrun/contracts';
import { createDataSource } from '@agentrun/persistence';
import { oneToN } from '../support/invariants';
import { Platform, uniqueId, type TopicRecord } from '../support/platform';
import { SseClient } from '../support/sse';
import { stackUrls } from '../support/stack-env';
import { waitFor } from '../support/wait';

/**
 * Issue 16, finding 7: per-org quotas and the caps around SSE. Each org of the test has limits of its
 * own (AGENTRUN_QUOTAS), so the tests do not share a count; tools are paced, so a run stays active
 * long enough to be counted and streamed.
 */
const QUOTAS = {
  orgs: {
    // Written in capitals: org keys are normalised as every other org is.
    CAPPED: { active_runs: 2, max_steps: 50 },
    streams: { sse_streams: 2 },
    snaps: { snapshots_per_run: 3, snapshot_bytes_per_run: 1 },
  },
};

describe('quotas and caps', () => {
  const platform = new Platform({ AGENTRUN_QUOTAS: JSON.stringify(QUOTAS), TOOL_PACE_TICKS: '4', TOOL_PACE_MS: '150' });
  let outcomes: TopicRecord<CommandOutcome>[];
  const cleanup: { org: string; runId: string }[] = [];

  beforeAll(async () => {
    await platform.start();
    outcomes = await platform.follow<CommandOutcome>(TOPICS.commandResults);
  });
  afterAll(async () => {
    // Nothing this file started keeps running on the shared stack.
    for (const { org, runId } of cleanup) await platform.http('POST', `/runs/${runId}/cancel`, { org, body: {} }).catch(() => undefined);
    await platform.stop();
  });

  async function start(org: string, body: Record<string, unknown>) {
    const runId = (body.run_id as string | undefined) ?? uniqueId('q');
    const res = await platform.http('POST', '/agents', { org, body: { ...body, run_id: runId } });
    if (res.status === 202) cleanup.push({ org: org.toLowerCase(), runId });
    return { runId, res };
  }

  async function kafkaStart(org: string, payload: Record<string, unknown>): Promise<CommandOutcome> {
    const commandId = uniqueId('c');
    const runId = uniqueId('k');
    await platform.publishCommand({ command_id: commandId, type: 'agent.start', org, run_id: runId, payload });
    const outcome = await waitFor(`the outcome of ${commandId}`, () => outcomes.find((o) => o.value.command_id === commandId)?.value);
    if (outcome.outcome === 'accepted') cleanup.push({ org: org.toLowerCase(), runId });
    return outcome;
  }

  it('active runs: the start past the limit is a 429 over HTTP and rejected / quota_exceeded over Kafka, and room comes back when a run ends', async () => {
    // Started back to back: the second start and the refusal come before the projector has the first
    // run, so the count includes starts not yet projected.
    const first = await start('Capped', { goal: 'hold a slot', max_steps: 40 });
    const second = await start('capped', { goal: 'hold another', max_steps: 40 });
    expect([first.res.status, second.res.status]).toEqual([202, 202]);

    const third = await start('capped', { goal: 'one too many', max_steps: 1 });
    expect(third.res.status).toBe(429);
    expect(third.res.headers.get('content-type')).toMatch(/application\/problem\+json/);
    expect(third.res.body).toMatchObject({ status: 429, reason: 'quota_exceeded' });
    expect(third.res.body.detail).toMatch(/^org capped has 2 active runs, its limit \(active_runs in AGENTRUN_QUOTAS\) is 2/);
    // Refused, not started: the run id is free, and no workflow was made for it.
    expect(await platform.http('GET', `/runs/${third.runId}`, { org: 'capped' })).toMatchObject({ status: 404 });

    const overKafka = await kafkaStart('CAPPED', { goal: 'one too many, by Kafka', max_steps: 1 });
    expect(overKafka).toMatchObject({ org: 'capped', outcome: 'rejected', reason: 'quota_exceeded', message: expect.stringMatching(/active_runs in AGENTRUN_QUOTAS\) is 2/) });

    // Another org is not held to capped's count.
    expect((await start('roomy', { goal: 'elsewhere', max_steps: 1 })).res.status).toBe(202);

    expect((await platform.http('POST', `/runs/${first.runId}/cancel`, { org: 'capped', body: {} })).status).toBe(202);
    await platform.waitForStatus('capped', first.runId, 'cancelled');
    const after = await start('capped', { goal: 'a slot freed', max_steps: 1 });
    expect(after.res.status).toBe(202);
    await platform.waitForStatus('capped', after.runId, 'done');
  });

  it('max_steps over the org limit is a 429 over HTTP and quota_exceeded over Kafka; an org without a limit of its own has the default, 1,000', async () => {
    const over = await start('capped', { goal: 'too long', max_steps: 51 });
    expect(over.res.status).toBe(429);
    expect(over.res.body).toMatchObject({ reason: 'quota_exceeded', detail: "max_steps 51 is over org capped's limit of 50 (max_steps in AGENTRUN_QUOTAS)" });
    const overKafka = await kafkaStart('capped', { goal: 'too long, by Kafka', max_steps: 51 });
    expect(overKafka).toMatchObject({ outcome: 'rejected', reason: 'quota_exceeded', message: "max_steps 51 is over org capped's limit of 50 (max_steps in AGENTRUN_QUOTAS)" });
    // Within the contracts' own maximum (10,000), an org without a limit of its own has the default, 1,000.
    const overDefault = await start('roomy', { goal: 'too long for anyone', max_steps: 1_001 });
    expect(overDefault.res).toMatchObject({ status: 429, body: { reason: 'quota_exceeded' } });
  });

  it('SSE: the stream past the org limit is a 429 problem before it opens, and a closed stream frees its slot', async () => {
    const { runId, res } = await start('streams', { goal: 'be watched', max_steps: 30 });
    expect(res.status).toBe(202);
    await waitFor('the run to be projected', async () => (await platform.http('GET', `/runs/${runId}`, { org: 'streams' })).status === 200);
    const url = `${platform.gatewayUrl}/runs/${runId}/events`;
    const open = [new SseClient(url, { 'X-Org': 'streams' }), new SseClient(url, { 'X-Org': 'streams' })];
    await waitFor('two streams open', () => open.every((s) => s.status === 200 && s.frames.length > 0));

    const refused = await platform.http('GET', `/runs/${runId}/events`, { org: 'streams' });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('content-type')).toMatch(/application\/problem\+json/);
    expect(refused.body).toMatchObject({ reason: 'quota_exceeded', detail: expect.stringMatching(/^org streams holds 2 open streams, its limit \(sse_streams in AGENTRUN_QUOTAS\) is 2/) });
    // Another org's streams are not counted against this one.
    expect((await platform.http('GET', `/runs/${runId}/events`, { org: 'other' })).status).toBe(404);

    open[0].close();
    // The gateway frees the slot when it sees the connection close.
    const third = await waitFor('a slot freed by the closed stream', async () => {
      const s = new SseClient(url, { 'X-Org': 'streams' });
      await waitFor('an answer', () => s.status !== 0 || s.ended);
      if (s.status === 200) return s;
      await s.finished();
      return undefined;
    });
    third.close();
    open[1].close();
    await platform.http('POST', `/runs/${runId}/cancel`, { org: 'streams', body: {} });
  });

  it('several streams on one run, resumed at different points, each get every event after their own point, once and in order', async () => {
    const { runId, res } = await start('fans', { goal: 'be watched by many', max_steps: 6 });
    expect(res.status).toBe(202);
    await waitFor('the run to be projected', async () => (await platform.http('GET', `/runs/${runId}`, { org: 'fans' })).status === 200);
    const resumes = [0, 0, 0, 1, 2, 3];
    const streams = resumes.map((after) => new SseClient(`${platform.gatewayUrl}/runs/${runId}/events?after=${after}`, { 'X-Org': 'fans' }));
    await Promise.all(streams.map((s) => s.finished()));
    const run = await platform.http('GET', `/runs/${runId}`, { org: 'fans' });
    expect(run.body.status).toBe('done');
    const last = run.body.last_seq as number;
    streams.forEach((s, i) => {
      expect({ after: resumes[i], seqs: s.events().map((e) => e.seq) }).toEqual({ after: resumes[i], seqs: oneToN(last).slice(resumes[i]) });
      expect(s.frames[s.frames.length - 1]).toMatchObject({ event: 'end' });
    });
  });

  it('snapshots: a start over the count limit is refused; interior captures past the bytes limit are skipped and the run still ends done with its final', async () => {
    const over = await start('snaps', { goal: 'too many snapshots', max_steps: 2, snapshots: { per_turn: true, max_snapshots: 4 } });
    expect(over.res.status).toBe(429);
    expect(over.res.body).toMatchObject({ reason: 'quota_exceeded', detail: expect.stringMatching(/snapshots\.max_snapshots 4 is over org snaps's limit of 3 snapshots per run/) });
    const overKafka = await kafkaStart('snaps', { goal: 'too many, by Kafka', max_steps: 2, snapshots: { per_turn: true, max_snapshots: 4 } });
    expect(overKafka).toMatchObject({ outcome: 'rejected', reason: 'quota_exceeded' });

    // One byte per run: the first capture lands, and once the manifest has it the rest are skipped.
    const { runId, res } = await start('snaps', { goal: 'capture until full', max_steps: 8, snapshots: { per_turn: true, max_snapshots: 3 } });
    expect(res.status).toBe(202);
    await platform.waitForStatus('snaps', runId, 'done');
    const rows = await waitFor('the final row', async () => {
      const list = await platform.query<{ is_final: boolean; capture_status: string; capture_reason: string | null }>(
        'SELECT is_final, capture_status, capture_reason FROM snapshots WHERE org = $1 AND run_id = $2 ORDER BY seq',
        ['snaps', runId],
      );
      return list.some((r) => r.is_final) ? list : undefined;
    });
    expect(rows[0]).toMatchObject({ is_final: false, capture_status: 'ok' });
    const declined = rows.filter((r) => r.capture_reason?.startsWith('quota_exceeded'));
    expect(declined.length).toBeGreaterThan(0);
    for (const row of declined) {
      expect(row).toMatchObject({ is_final: false, capture_status: 'skipped' });
      expect(row.capture_reason).toMatch(/^quota_exceeded: the run's snapshots hold \d+ bytes, org snaps's limit \(snapshot_bytes_per_run\) is 1$/);
    }
    expect(rows[rows.length - 1]).toMatchObject({ is_final: true, capture_status: 'ok' });
  });

  it('a statement over DATABASE_STATEMENT_TIMEOUT_MS fails with query_canceled instead of holding its connection', async () => {
    const dataSource = createDataSource({ url: stackUrls().databaseUrl(platform.database), poolSize: 1, applicationName: 'quotas-e2e', statementTimeoutMs: 200 });
    await dataSource.initialize();
    try {
      const began = Date.now();
      await expect(dataSource.query('SELECT pg_sleep(5)')).rejects.toMatchObject({ code: '57014' });
      expect(Date.now() - began).toBeLessThan(4_000);
      // The connection is usable again at once.
      await expect(dataSource.query('SELECT 1 AS one')).resolves.toEqual([{ one: 1 }]);
    } finally {
      await dataSource.destroy();
    }
  });
});
