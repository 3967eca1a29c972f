import { oneToN, scriptedRunShape } from '../support/invariants';
import { Platform, uniqueId } from '../support/platform';
import { SseClient } from '../support/sse';
import { waitFor } from '../support/wait';

describe('the gateway API', () => {
  const platform = new Platform();
  beforeAll(() => platform.start());
  afterAll(() => platform.stop());

  it('POST /agents starts a run (202) and GET /runs/{id} shows it done with its last events', async () => {
    const runId = uniqueId('web');
    const res = await platform.http('POST', '/agents', { org: 'acme', body: { run_id: runId, goal: 'index the notes', max_steps: 3 } });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ run_id: runId, outcome: 'accepted' });
    await platform.waitForStatus('acme', runId, 'done');
    const run = await platform.http('GET', `/runs/${runId}`, { org: 'acme' });
    expect(run.status).toBe(200);
    expect(run.body).toMatchObject({ run_id: runId, kind: 'agent', status: 'done', last_seq: 5 });
    expect(run.body.state).toMatchObject({ status: 'done', goal: 'index the notes', step: 3 });
    expect(run.body.last_events.map((e: { seq: number }) => e.seq)).toEqual(oneToN(5));
  });

  it('a generated run id is returned, and a second start of the same id is a 409', async () => {
    const res = await platform.http('POST', '/agents', { org: 'acme', body: { goal: 'no id given', max_steps: 1 } });
    expect(res.status).toBe(202);
    expect(res.body.run_id).toMatch(/^agent-/);
    const again = await platform.http('POST', '/agents', { org: 'acme', body: { run_id: res.body.run_id, goal: 'again', max_steps: 1 } });
    expect(again.status).toBe(409);
    expect(again.headers.get('content-type')).toMatch(/application\/problem\+json/);
    expect(again.body).toMatchObject({ status: 409, reason: 'run_exists' });
  });

  it('Idempotency-Key makes a retried POST the same command', async () => {
    const runId = uniqueId('idem');
    const key = uniqueId('key');
    const first = await platform.http('POST', '/agents', { org: 'acme', headers: { 'Idempotency-Key': key }, body: { run_id: runId, goal: 'g', max_steps: 1 } });
    const second = await platform.http('POST', '/agents', { org: 'acme', headers: { 'Idempotency-Key': key }, body: { run_id: runId, goal: 'g', max_steps: 1 } });
    expect(first.body).toMatchObject({ command_id: key, outcome: 'accepted' });
    expect(second.status).toBe(202);
    expect(second.body).toMatchObject({ command_id: key, outcome: 'duplicate' });
  });

  it('bad input gets a 4xx problem that says what is wrong', async () => {
    const cases: [string, string, Parameters<Platform['http']>[2], number, RegExp][] = [
      ['POST', '/agents', { org: 'acme', body: { goal: '' } }, 400, /goal/],
      ['POST', '/agents', { org: 'acme', body: { goal: 'x'.repeat(8_001) } }, 400, /8000/],
      ['POST', '/agents', { org: 'acme', body: { goal: 'ok', max_steps: 'many' } }, 400, /max_steps/],
      ['POST', '/agents', { org: 'acme', body: { goal: 'ok', colour: 'red' } }, 400, /colour/],
      ['POST', '/agents', { org: 'acme', body: { goal: 'ok', run_id: '../etc' } }, 400, /run id/],
      ['POST', '/agents', { org: 'acme', body: '{"goal": ' }, 400, /JSON/],
      ['POST', '/agents', { org: 'acme', body: { goal: 'y'.repeat(70_000) } }, 413, /limit/],
      ['POST', '/agents', { body: { goal: 'no org' } }, 401, /X-Org/],
      ['GET', '/runs?limit=0', { org: 'acme' }, 400, /limit/],
      ['GET', '/runs?status=sleeping', { org: 'acme' }, 400, /status/],
      ['GET', "/runs?cursor=' OR 1=1 --", { org: 'acme' }, 400, /cursor/],
      ['GET', '/runs/nope/events?after=-1', { org: 'acme' }, 400, /seq/],
      ['POST', '/runs/x/explode', { org: 'acme', body: {} }, 404, /explode/],
      ['POST', '/agents', { org: 'acme', body: { goal: 'nul \u0000 inside' } }, 400, /NUL/],
      ['GET', '/runs?cursor=a&cursor=b', { org: 'acme' }, 400, /once/],
    ];
    for (const [method, path, options, status, detail] of cases) {
      const res = await platform.http(method, path, options);
      expect({ path, status: res.status }).toEqual({ path, status });
      expect(res.headers.get('content-type')).toMatch(/application\/problem\+json/);
      expect(res.body.detail).toMatch(detail);
    }
  });

  it('GET /runs pages newest first with an opaque cursor, and a tampered cursor is a 400', async () => {
    const org = uniqueId('pager');
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const runId = `p${i}`;
      ids.push(runId);
      await platform.http('POST', '/agents', { org, body: { run_id: runId, goal: `page ${i}`, max_steps: 1 } });
      await platform.waitForStatus(org, runId, 'done');
    }
    const seen: string[] = [];
    const cursors: string[] = [];
    let cursor: string | null = null;
    do {
      const res: { status: number; body: { runs: { run_id: string }[]; next_cursor: string | null } } = await platform.http(
        'GET',
        `/runs?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
        { org },
      );
      expect(res.status).toBe(200);
      seen.push(...res.body.runs.map((r) => r.run_id));
      cursor = res.body.next_cursor;
      if (cursor) cursors.push(cursor);
    } while (cursor);
    expect(seen).toEqual([...ids].reverse());
    // Five runs two to a page: at least two cursors handed out. Each is signed: its signature on another body is refused.
    expect(cursors.length).toBeGreaterThanOrEqual(2);
    const forged = Buffer.from(JSON.stringify(['2999-01-01T00:00:00.000Z', 'zzz'])).toString('base64url');
    for (const handedOut of cursors) {
      const [body, sig] = handedOut.split('.');
      expect(body).toBeTruthy();
      const tampered = await platform.http('GET', `/runs?cursor=${forged}.${sig}`, { org });
      expect({ cursor: handedOut, status: tampered.status }).toEqual({ cursor: handedOut, status: 400 });
    }
    const filtered = await platform.http('GET', '/runs?kind=agent&status=done&limit=200', { org });
    expect(filtered.body.runs).toHaveLength(5);
    const none = await platform.http('GET', '/runs?kind=eval', { org });
    expect(none.body.runs).toHaveLength(0);
  });

  it("another org gets 404 on every route for a run it does not own", async () => {
    const runId = uniqueId('private');
    await platform.http('POST', '/agents', { org: 'acme', body: { run_id: runId, goal: 'secret', max_steps: 1 } });
    await platform.waitForStatus('acme', runId, 'done');
    expect((await platform.http('GET', `/runs/${runId}`, { org: 'globex' })).status).toBe(404);
    expect((await platform.http('GET', `/runs/${runId}/events`, { org: 'globex' })).status).toBe(404);
    for (const action of ['pause', 'resume', 'cancel']) {
      expect((await platform.http('POST', `/runs/${runId}/${action}`, { org: 'globex', body: {} })).status).toBe(404);
    }
    const list = await platform.http('GET', '/runs?limit=200', { org: 'globex' });
    expect(list.body.runs.map((r: { run_id: string }) => r.run_id)).not.toContain(runId);
    // The owner still sees it.
    expect((await platform.http('GET', `/runs/${runId}`, { org: 'acme' })).status).toBe(200);
  });

  it('an SSE stream resumed with Last-Event-ID never resends or skips an event', async () => {
    const runId = uniqueId('stream');
    await platform.http('POST', '/agents', { org: 'acme', body: { run_id: runId, goal: 'stream me', max_steps: 30 } });
    const first = new SseClient(`${platform.gatewayUrl}/runs/${runId}/events`, { 'X-Org': 'acme' });
    await waitFor('a few live events', () => first.events().length >= 4, 60_000);
    first.close();
    const received = first.events().map((e) => e.seq);
    const lastId = received[received.length - 1];
    const second = new SseClient(`${platform.gatewayUrl}/runs/${runId}/events`, { 'X-Org': 'acme', 'Last-Event-ID': String(lastId) });
    await second.finished();
    const resumed = second.events().map((e) => e.seq);
    expect(resumed[0]).toBe(lastId + 1);
    const all = [...received, ...resumed];
    expect(all).toEqual(oneToN(all.length));
    expect(second.events()[second.events().length - 1].payload.state?.status).toBe('done');
    const n = scriptedRunShape(30).events;
    expect(all.length).toBe(n);
    // Resuming at the last event of a finished run ends at once instead of waiting forever.
    const atEnd = new SseClient(`${platform.gatewayUrl}/runs/${runId}/events?after=${n}`, { 'X-Org': 'acme' });
    await atEnd.finished();
    expect(atEnd.events()).toEqual([]);
    expect(atEnd.frames.map((f) => f.event)).toEqual(['end']);
  });

  it('change-goal goes through the Update validator: a blank goal is a 400 at the boundary, a good one is applied', async () => {
    const runId = uniqueId('goal');
    await platform.http('POST', '/agents', { org: 'acme', body: { run_id: runId, goal: 'first goal', max_steps: 400 } });
    await platform.waitForStatus('acme', runId, 'running');
    const blank = await platform.http('POST', `/runs/${runId}/change-goal`, { org: 'acme', body: { goal: '   ' } });
    expect(blank.status).toBe(400);
    const ok = await platform.http('POST', `/runs/${runId}/change-goal`, { org: 'acme', body: { goal: 'second goal' } });
    expect(ok.status).toBe(202);
    expect(ok.body.message).toMatch(/second goal/);
    await waitFor('the goal in the read model', async () => {
      const run = await platform.http('GET', `/runs/${runId}`, { org: 'acme' });
      return run.body.state?.goal === 'second goal';
    });
    expect((await platform.http('POST', `/runs/${runId}/cancel`, { org: 'acme', body: {} })).status).toBe(202);
    await platform.waitForStatus('acme', runId, 'cancelled');
    const closed = await platform.http('POST', `/runs/${runId}/pause`, { org: 'acme', body: {} });
    expect(closed.status).toBe(409);
    expect(closed.body.reason).toBe('run_closed');
  });

  it('serves its OpenAPI document and health endpoints', async () => {
    const docs = await platform.http('GET', '/docs');
    expect(docs.status).toBe(200);
    expect(docs.body.openapi).toBe('3.1.0');
    expect(Object.keys(docs.body.paths)).toEqual(expect.arrayContaining(['/agents', '/runs', '/runs/{id}', '/runs/{id}/events']));
    for (const app of ['gateway', 'orchestrator', 'gpu-worker', 'projector', 'snapshotter'] as const) {
      const live = await fetch(`http://127.0.0.1:${platform.ports[app]}/livez`);
      const ready = await fetch(`http://127.0.0.1:${platform.ports[app]}/readyz`);
      expect([app, live.status, ready.status]).toEqual([app, 200, 200]);
    }
  });
});
