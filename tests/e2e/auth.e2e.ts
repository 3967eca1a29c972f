import { createDataSource, migrate, TokenStore } from '@agentrun/persistence';
import type { DataSource } from 'typeorm';
import { Platform, uniqueId } from '../support/platform';
import { SseClient } from '../support/sse';
import { stackUrls } from '../support/stack-env';
import { tokenCli } from '../support/token-cli';

const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });

/** Bodies that pass validation for each control route, so only the org decides the answer. */
const CONTROL_BODIES = (otherRunId: string): Record<string, unknown> => ({
  pause: {},
  resume: {},
  cancel: {},
  'inject-context': { text: 'hello' },
  'change-goal': { goal: 'take it over' },
  approve: { reviewer: 'mallory' },
  'retry-failed': {},
  fork: { from_run_id: otherRunId, snapshot_id: 'snap-1' },
});

describe('token auth', () => {
  const platform = new Platform({ AGENTRUN_MODE: 'production' });
  let databaseUrl: string;
  let dataSource: DataSource;
  let tokens: TokenStore;
  let tokenA: string;
  let tokenB: string;
  const orgA = uniqueId('orga');
  const orgB = uniqueId('orgb');
  const runA = uniqueId('mine');
  const runB = uniqueId('theirs');

  beforeAll(async () => {
    await platform.start();
    databaseUrl = stackUrls().databaseUrl(platform.database);
    dataSource = createDataSource({ url: databaseUrl, poolSize: 2, applicationName: 'auth-e2e' });
    await dataSource.initialize();
    await migrate(dataSource);
    tokens = new TokenStore(dataSource);
  });
  afterAll(async () => {
    await dataSource?.destroy();
    await platform.stop();
  });

  it('the CLI creates a token once, lists without values, and refuses bad arguments with exit code 2', async () => {
    const created = await tokenCli(databaseUrl, 'create', '--org', orgA, '--subject', 'mallory', '--label', 'e2e');
    expect(created.code).toBe(0);
    tokenA = /^token: (ar_[A-Za-z0-9_-]{43})$/m.exec(created.stdout)?.[1] ?? '';
    expect(tokenA).toMatch(/^ar_/);
    expect(created.stdout).toMatch(/^id: +tok_[0-9a-f]{16}$/m);
    expect(created.stdout).toMatch(/^subject: mallory$/m);
    expect(created.stderr).toMatch(/cannot be shown again/);
    tokenB = (await tokens.create(orgB, 'b')).token;

    const listed = await tokenCli(databaseUrl, 'list');
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain(orgA);
    expect(listed.stdout).toContain(orgB);
    expect(listed.stdout).not.toContain(tokenA);
    expect(listed.stdout).not.toContain(tokenB);
    expect(listed.stdout).not.toMatch(/ar_/);
    const onlyA = await tokenCli(databaseUrl, 'list', '--org', orgA);
    expect(onlyA.stdout).toContain(orgA);
    expect(onlyA.stdout).toMatch(new RegExp(`\\t${orgA}\\tsubject mallory\\tactive\\t`));
    expect(onlyA.stdout).not.toContain(orgB);

    const fromStore = await tokens.list();
    expect(fromStore.length).toBe(2);
    for (const row of fromStore) expect(Object.keys(row).sort()).toEqual(['created_at', 'id', 'label', 'org', 'revoked_at', 'subject']);
    expect(JSON.stringify(fromStore)).not.toMatch(/ar_/);
    // Only a hash is stored.
    const stored = await platform.query<{ token_hash: string }>('SELECT token_hash FROM api_tokens');
    expect(JSON.stringify(stored)).not.toContain(tokenA);
    expect(stored.every((r) => /^[0-9a-f]{64}$/.test(r.token_hash))).toBe(true);

    for (const args of [[], ['create'], ['create', '--org'], ['create', '--org', 'a b'], ['create', '--org', 'a', '--subject', 'has space'], ['list', '--colour', 'red'], ['revoke'], ['revoke', 'x', 'y'], ['frobnicate']]) {
      const bad = await tokenCli(databaseUrl, ...args);
      expect({ args, code: bad.code }).toEqual({ args, code: 2 });
      expect(bad.stderr).toMatch(/usage:/);
    }
  });

  it('without a live token every route is a 401 with WWW-Authenticate: Bearer, and X-Org alone does not help', async () => {
    const routes: [string, string, unknown][] = [
      ['GET', '/runs', undefined],
      ['GET', `/runs/${runA}`, undefined],
      ['GET', `/runs/${runA}/events`, undefined],
      ['POST', '/agents', { run_id: runA, goal: 'sneak in', max_steps: 1 }],
      ['POST', '/evals', {}],
      ...Object.entries(CONTROL_BODIES(runB)).map(([action, body]): [string, string, unknown] => ['POST', `/runs/${runA}/${action}`, body]),
    ];
    const credentials: [string, Record<string, string>][] = [
      ['nothing', {}],
      ['X-Org alone', { 'X-Org': orgA }],
      ['an unknown token', bearer('ar_' + 'x'.repeat(43))],
      ['an unknown token and X-Org', { ...bearer('ar_nope'), 'X-Org': orgA }],
      ['a malformed Authorization', { Authorization: `Basic ${Buffer.from('a:b').toString('base64')}`, 'X-Org': orgA }],
      ['an unknown session cookie', { Cookie: 'agentrun_session=ar_nope', 'X-Org': orgA }],
    ];
    for (const [what, headers] of credentials) {
      for (const [method, path, body] of routes) {
        const res = await platform.http(method, path, { headers, body });
        expect({ what, method, path, status: res.status }).toEqual({ what, method, path, status: 401 });
        expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
        expect(res.headers.get('content-type')).toMatch(/application\/problem\+json/);
      }
    }
    // Nothing was started by any of that.
    expect(await platform.query('SELECT 1 FROM command_ledger')).toHaveLength(0);
    // Health and docs stay open.
    expect((await platform.http('GET', '/docs')).status).toBe(200);
  });

  it("an org's token starts and reads its own runs, and another org's run is indistinguishable from no run", async () => {
    const started = await platform.http('POST', '/agents', { headers: bearer(tokenA), body: { run_id: runA, goal: 'mine', max_steps: 2 } });
    expect(started.status).toBe(202);
    // X-Org cannot move a token's request into another org.
    const startedB = await platform.http('POST', '/agents', { headers: { ...bearer(tokenB), 'X-Org': orgA }, body: { run_id: runB, goal: 'theirs', max_steps: 2 } });
    expect(startedB.status).toBe(202);
    await platform.waitForStatus(orgA, runA, 'done');
    await platform.waitForStatus(orgB, runB, 'done'); // in B's org, whatever X-Org said
    expect(await platform.query('SELECT 1 FROM runs WHERE org = $1', [orgA])).toHaveLength(1);

    const mine = await platform.http('GET', `/runs/${runA}`, { headers: bearer(tokenA) });
    expect(mine.status).toBe(200);
    expect(mine.body).toMatchObject({ run_id: runA, status: 'done' });

    expect((await platform.http('GET', `/runs/${runB}`, { headers: bearer(tokenA) })).status).toBe(404);
    expect((await platform.http('GET', `/runs/${runB}/events`, { headers: bearer(tokenA) })).status).toBe(404);
    for (const [action, body] of Object.entries(CONTROL_BODIES(runB))) {
      if (action === 'fork') continue;
      const res = await platform.http('POST', `/runs/${runB}/${action}`, { headers: bearer(tokenA), body });
      expect({ action, status: res.status }).toEqual({ action, status: 404 });
    }
    // fork names B's run as its source: the answer must be the one for a run that does not exist
    // (today 501 not_supported for every fork, until forking lands).
    const forkFromB = await platform.http('POST', `/runs/${uniqueId('fork')}/fork`, { headers: bearer(tokenA), body: CONTROL_BODIES(runB).fork });
    const forkFromNothing = await platform.http('POST', `/runs/${uniqueId('fork')}/fork`, { headers: bearer(tokenA), body: CONTROL_BODIES(uniqueId('nothing')).fork });
    expect(forkFromB.status).toBe(forkFromNothing.status);
    expect(forkFromB.body.reason).toBe(forkFromNothing.body.reason);
    expect(forkFromB.status).toBeGreaterThanOrEqual(400);
    expect(JSON.stringify(forkFromB.body)).not.toMatch(/theirs|exists/);
    const listA = await platform.http('GET', '/runs?limit=200', { headers: bearer(tokenA) });
    expect(listA.status).toBe(200);
    const idsA = listA.body.runs.map((r: { run_id: string }) => r.run_id);
    expect(idsA).toContain(runA);
    expect(idsA).not.toContain(runB);
    // B still sees its run, untouched.
    const theirs = await platform.http('GET', `/runs/${runB}`, { headers: bearer(tokenB) });
    expect(theirs.body).toMatchObject({ run_id: runB, status: 'done' });
  });

  it('POST /session sets an HttpOnly SameSite=Strict cookie holding a session id (not the token) that works for GET /runs and the SSE stream; DELETE ends it', async () => {
    const session = await platform.http('POST', '/session', { headers: bearer(tokenA) });
    expect(session.status).toBe(204);
    const setCookie = session.headers.get('set-cookie') ?? '';
    const attributes = setCookie.split(';').map((p) => p.trim());
    expect(attributes[0]).toMatch(/^agentrun_session=[A-Za-z0-9_-]{43}$/);
    expect(attributes[0]).not.toContain(tokenA);
    expect(attributes).toEqual(expect.arrayContaining(['HttpOnly', 'SameSite=Strict', 'Path=/']));
    expect(attributes).not.toContain('Secure'); // plain http here
    const cookie = { Cookie: `theme=dark; ${attributes[0]}` };

    const list = await platform.http('GET', '/runs', { headers: cookie });
    expect(list.status).toBe(200);
    expect(list.body.runs.map((r: { run_id: string }) => r.run_id)).toContain(runA);

    const stream = new SseClient(`${platform.gatewayUrl}/runs/${runA}/events`, cookie);
    await stream.finished();
    expect(stream.status).toBe(200);
    expect(stream.events().length).toBeGreaterThan(0);
    expect(stream.frames[stream.frames.length - 1].event).toBe('end');
    const refused = new SseClient(`${platform.gatewayUrl}/runs/${runB}/events`, cookie);
    await refused.finished();
    expect(refused.status).toBe(404);

    // The token may come in the body too; a bad one sets nothing.
    const byBody = await platform.http('POST', '/session', { body: { token: tokenB } });
    expect(byBody.status).toBe(204);
    expect(byBody.headers.get('set-cookie')).toMatch(/^agentrun_session=[A-Za-z0-9_-]{43};/);
    const bad = await platform.http('POST', '/session', { body: { token: 'ar_nope' } });
    expect(bad.status).toBe(401);
    expect(bad.headers.get('set-cookie')).toBeNull();
    expect((await platform.http('POST', '/session', {})).status).toBe(401);

    const ended = await platform.http('DELETE', '/session', { headers: cookie });
    expect(ended.status).toBe(204);
    expect(ended.headers.get('set-cookie')).toMatch(/^agentrun_session=;.*Max-Age=0/);
    expect((await platform.http('GET', '/runs', { headers: cookie })).status).toBe(401);
  });

  it('a revoked token, as bearer or through a session it opened, is refused on the very next request', async () => {
    const { id, token } = await tokens.create(orgA, 'short-lived');
    const session = await platform.http('POST', '/session', { headers: bearer(token) });
    const cookie = { Cookie: (session.headers.get('set-cookie') ?? '').split(';')[0] };
    expect((await platform.http('GET', '/runs', { headers: bearer(token) })).status).toBe(200);
    expect((await platform.http('GET', '/runs', { headers: cookie })).status).toBe(200);

    const revoked = await tokenCli(databaseUrl, 'revoke', id);
    expect(revoked.code).toBe(0);
    expect(revoked.stdout).toContain(`revoked ${id}`);
    expect((await platform.http('GET', '/runs', { headers: bearer(token) })).status).toBe(401);
    expect((await platform.http('GET', '/runs', { headers: cookie })).status).toBe(401);
    expect((await platform.http('POST', '/session', { headers: bearer(token) })).status).toBe(401);

    const listed = await tokenCli(databaseUrl, 'list', '--org', orgA);
    expect(listed.stdout).toMatch(new RegExp(`${id}\\t${orgA}\\tno subject\\trevoked `));
    expect(listed.stdout).not.toContain(token);
    expect((await tokenCli(databaseUrl, 'revoke', id)).stdout).toMatch(/already revoked/);
    expect((await tokenCli(databaseUrl, 'revoke', 'tok_0000000000000000')).code).toBe(1);
    // The other tokens still work.
    expect((await platform.http('GET', '/runs', { headers: bearer(tokenA) })).status).toBe(200);
  });
});
