import { createHash } from 'node:crypto';
import { Platform, uniqueId } from '../support/platform';
import { stackUrls } from '../support/stack-env';
import { tokenCli } from '../support/token-cli';
import { waitFor } from '../support/wait';

/**
 * Issue 16, findings 5 and 6, on a production-mode platform as a deployment runs it behind a proxy
 * that terminates TLS (GATEWAY_TRUST_PROXY): browser sessions kept on the server, and approvals given
 * by the authenticated subject, not the name in the body. Sessions here are short (idle 3 s, at most
 * 6 s), so both expiries can be watched; every other request authenticates with a bearer token.
 */

const IDLE_S = 3;
const MAX_S = 6;
const SESSION_ID = /^[A-Za-z0-9_-]{43}$/;

const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });

/** The `name=value` of a Set-Cookie header, and its attributes. */
function parseSetCookie(header: string | null): { pair: string; name: string; value: string; attributes: string[] } {
  const [pair, ...attributes] = (header ?? '').split(';').map((part) => part.trim());
  const eq = pair.indexOf('=');
  return { pair, name: pair.slice(0, eq), value: pair.slice(eq + 1), attributes };
}

describe('server-side sessions and approval by subject (issue 16, findings 5 and 6)', () => {
  const platform = new Platform({
    AGENTRUN_MODE: 'production',
    GATEWAY_TRUST_PROXY: 'true',
    GATEWAY_SESSION_IDLE_SECONDS: String(IDLE_S),
    GATEWAY_SESSION_MAX_SECONDS: String(MAX_S),
    CASE_TICK_MS: '20',
    CASE_HICCUP_PER_MILLE: '0',
  });
  const org = uniqueId('sessions');
  const tokens: Record<'alice' | 'bob' | 'carol' | 'nobody', string> = { alice: '', bob: '', carol: '', nobody: '' };

  beforeAll(async () => {
    await platform.start();
    const databaseUrl = stackUrls().databaseUrl(platform.database);
    for (const who of ['alice', 'bob', 'carol', 'nobody'] as const) {
      const created = await tokenCli(databaseUrl, 'create', '--org', org, ...(who === 'nobody' ? [] : ['--subject', who]));
      expect(created.code).toBe(0);
      tokens[who] = /^token: (ar_\S+)$/m.exec(created.stdout)?.[1] ?? '';
      expect(created.stdout).toMatch(who === 'nobody' ? /^subject: \(none/m : new RegExp(`^subject: ${who}$`, 'm'));
    }
    const listed = await tokenCli(databaseUrl, 'list', '--org', org);
    expect(listed.stdout).toMatch(/\tsubject alice\tactive\t/);
    expect(listed.stdout).toMatch(/\tno subject\tactive\t/);
  });
  afterAll(() => platform.stop());

  const signIn = async (token: string, headers: Record<string, string> = {}) => {
    const res = await platform.http('POST', '/session', { headers: { ...bearer(token), ...headers } });
    expect(res.status).toBe(204);
    return parseSetCookie(res.headers.get('set-cookie'));
  };
  const runsWith = async (headers: Record<string, string>) => (await platform.http('GET', '/runs', { headers })).status;

  it('finding 5: the cookie holds an opaque session id stored hashed, not the token; after DELETE /session the same cookie is a 401', async () => {
    const cookie = await signIn(tokens.alice);
    expect(cookie.name).toBe('agentrun_session'); // plain http: no proxy said https
    expect(cookie.value).toMatch(SESSION_ID);
    expect(cookie.value).not.toContain(tokens.alice);
    expect(cookie.attributes).toEqual(expect.arrayContaining(['HttpOnly', 'SameSite=Strict', 'Path=/', `Max-Age=${MAX_S}`]));
    expect(cookie.attributes).not.toContain('Secure');
    // The table holds the id's hash only: reading it gives no working cookie.
    const rows = await platform.query<{ id_hash: string; subject: string }>('SELECT id_hash, subject FROM web_sessions WHERE org = $1', [org]);
    expect(rows.map((r) => r.id_hash)).toContain(createHash('sha256').update(cookie.value).digest('hex'));
    expect(JSON.stringify(rows)).not.toContain(cookie.value);

    const headers = { Cookie: cookie.pair };
    expect(await runsWith(headers)).toBe(200);
    const me = await platform.http('GET', '/session', { headers });
    expect(me.body).toEqual({ org, subject: 'alice', via: 'session' });

    // The request: DELETE /session, then the same cookie on GET /runs.
    const ended = await platform.http('DELETE', '/session', { headers });
    expect(ended.status).toBe(204);
    expect(parseSetCookie(ended.headers.get('set-cookie'))).toMatchObject({ name: 'agentrun_session', value: '' });
    const after = await platform.http('GET', '/runs', { headers });
    expect(after.status).toBe(401);
    expect(after.body.detail).toMatch(/session has ended/);
    // The token itself was never the cookie, and still works as a bearer token.
    expect(await runsWith({ Cookie: `agentrun_session=${tokens.alice}` })).toBe(401);
    expect(await runsWith(bearer(tokens.alice))).toBe(200);
  });

  it(`finding 5: a session left idle past ${IDLE_S} s is a 401`, async () => {
    const cookie = await signIn(tokens.alice);
    expect(await runsWith({ Cookie: cookie.pair })).toBe(200);
    const idHash = createHash('sha256').update(cookie.value).digest('hex');
    // No request in between (a request would keep it alive): wait on the row's own clock.
    await waitFor(
      'the session to sit idle past its limit',
      async () => (await platform.query<{ idle: boolean }>(`SELECT last_seen_at < now() - make_interval(secs => $2) AS idle FROM web_sessions WHERE id_hash = $1`, [idHash, IDLE_S + 0.5]))[0]?.idle,
      30_000,
      200,
    );
    expect(await runsWith({ Cookie: cookie.pair })).toBe(401);
  });

  it(`finding 5: a session in use ends ${MAX_S} s after sign-in, however busy`, async () => {
    const signedInAt = Date.now();
    const cookie = await signIn(tokens.alice);
    let lastOk = 0;
    // Requests every 200 ms keep it from idling out; only the absolute limit can end it.
    await waitFor(
      'the busy session to end',
      async () => {
        const status = await runsWith({ Cookie: cookie.pair });
        if (status === 200) lastOk = Date.now();
        return status === 401;
      },
      30_000,
      200,
    );
    const endedAfter = (Date.now() - signedInAt) / 1000;
    expect((lastOk - signedInAt) / 1000).toBeGreaterThan(IDLE_S); // in use past the idle limit
    expect(endedAfter).toBeGreaterThanOrEqual(MAX_S - 0.5);
  });

  it('finding 5: behind the trusted proxy over https the cookie is __Host- prefixed and Secure, and only the name that fits the scheme is read', async () => {
    const https = { 'X-Forwarded-Proto': 'https' };
    const cookie = await signIn(tokens.alice, https);
    expect(cookie.name).toBe('__Host-agentrun_session');
    expect(cookie.value).toMatch(SESSION_ID);
    expect(cookie.attributes).toEqual(expect.arrayContaining(['HttpOnly', 'SameSite=Strict', 'Path=/', 'Secure']));
    expect(cookie.attributes.some((a) => a.startsWith('Domain='))).toBe(false); // __Host- forbids one

    expect(await runsWith({ ...https, Cookie: cookie.pair })).toBe(200);
    // The same session id under the other name, or the __Host- cookie over plain http: not read.
    expect(await runsWith({ ...https, Cookie: `agentrun_session=${cookie.value}` })).toBe(401);
    expect(await runsWith({ Cookie: cookie.pair })).toBe(401);

    const ended = await platform.http('DELETE', '/session', { headers: { ...https, Cookie: cookie.pair } });
    expect(parseSetCookie(ended.headers.get('set-cookie'))).toMatchObject({ name: '__Host-agentrun_session', value: '' });
    expect(await runsWith({ ...https, Cookie: cookie.pair })).toBe(401);
  });

  describe('finding 6: an approval is the authenticated subject, checked against the run\'s reviewers', () => {
    const runId = uniqueId('eval-review');

    beforeAll(async () => {
      const started = await platform.http('POST', '/evals', {
        headers: bearer(tokens.alice),
        body: { run_id: runId, model: 'm', suite: 's', cases: 2, fail_fraction: 0, reviewers: ['alice', 'bob'] },
      });
      expect(started.status).toBe(202);
      await platform.waitForStatus(org, runId, 'awaiting_review');
    });
    const approve = (token: string, body: Record<string, unknown>) => platform.http('POST', `/runs/${runId}/approve`, { headers: bearer(token), body });

    it("a token for bob naming alice is a 403, and so is a token without a subject; neither reaches the run", async () => {
      const asAlice = await approve(tokens.bob, { reviewer: 'alice' });
      expect(asAlice.status).toBe(403);
      expect(asAlice.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(asAlice.body).toMatchObject({ title: 'not the signed-in subject', status: 403 });
      const noSubject = await approve(tokens.nobody, { reviewer: 'alice' });
      expect(noSubject.status).toBe(403);
      expect(noSubject.body).toMatchObject({ title: 'no subject', status: 403, detail: expect.stringMatching(/has no subject/) });
      expect(await platform.query("SELECT 1 FROM command_ledger WHERE org = $1 AND type = 'eval.approve'", [org])).toHaveLength(0);
    });

    it("a token for carol, who is not a reviewer, is the run's not_a_reviewer refusal", async () => {
      const res = await approve(tokens.carol, {});
      expect(res.status).toBe(422);
      expect(res.body).toMatchObject({ reason: 'not_a_reviewer', detail: "'carol' is not a reviewer of this run" });
      expect((await platform.http('GET', `/runs/${runId}`, { headers: bearer(tokens.alice) })).body.status).toBe('awaiting_review');
    });

    it("alice's token approves, and the approval names alice, whatever body it came with", async () => {
      const res = await approve(tokens.alice, {});
      expect(res.status).toBe(202);
      await platform.waitForStatus(org, runId, 'published');
      const run = await platform.http('GET', `/runs/${runId}`, { headers: bearer(tokens.alice) });
      expect(run.body.state).toMatchObject({ status: 'published', approved_by: 'alice' });
      const published = await platform.query<{ reviewer: string }>(
        `SELECT event->'payload'->>'reviewer' AS reviewer FROM run_events WHERE org = $1 AND run_id = $2 AND type = 'status_changed' AND event->'payload'->'state'->>'status' = 'published'`,
        [org, runId],
      );
      expect(published.map((r) => r.reviewer)).toEqual(['alice']);
    });
  });

  it('finding 6: an eval without reviewers (absent or empty) is a 400 at start, and no run begins', async () => {
    for (const reviewers of [undefined, []]) {
      const runId = uniqueId('eval-nobody');
      const res = await platform.http('POST', '/evals', {
        headers: bearer(tokens.alice),
        body: { run_id: runId, model: 'm', suite: 's', cases: 2, ...(reviewers ? { reviewers } : {}) },
      });
      expect({ reviewers, status: res.status }).toEqual({ reviewers, status: 400 });
      expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(res.body).toMatchObject({ reason: 'invalid_payload', detail: expect.stringMatching(/^an eval needs at least one reviewer/) });
      expect((await platform.http('GET', `/runs/${runId}`, { headers: bearer(tokens.alice) })).status).toBe(404);
    }
  });
});
