import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { Client as PgClient } from 'pg';
import { TOPICS, type CommandOutcome, type SnapshotRow } from '@agentrun/contracts';
import { createToken } from '../support/browser';
import { APPS, Platform, uniqueId } from '../support/platform';
import { SseClient } from '../support/sse';
import { stackUrls } from '../support/stack-env';
import { waitFor } from '../support/wait';

/**
 * Issue 16, findings 3, 4 and 9, each as the request the issue made: what a page on another site (or
 * another port of the same host) could get from a developer's gateway, and what internal text reached
 * clients. One local-mode platform; each tool call takes a second, so a run can be steered.
 */

/** A request with exactly this Host header, as curl -H 'Host: ...' sends it (fetch sets its own). */
function raw(port: number, method: string, path: string, headers: Record<string, string>): Promise<{ status: number; body: string; type?: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers, setHost: !('Host' in headers) }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, type: res.headers['content-type'] }));
    });
    req.on('error', reject);
    req.end();
  });
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('what a browser elsewhere can do to the gateway, and what internal text reaches clients', () => {
  const platform = new Platform({ TOOL_PACE_TICKS: '4', TOOL_PACE_MS: '250' });
  const org = uniqueId('websec');
  let token: string;
  let outcomes: { value: CommandOutcome }[];

  beforeAll(async () => {
    await platform.start();
    token = await createToken(stackUrls().databaseUrl(platform.database), org);
    outcomes = await platform.follow<CommandOutcome>(TOPICS.commandResults);
  });
  afterAll(() => platform.stop());

  const gatewayLog = () => readFileSync(join(platform.dataDir, 'logs', 'gateway.log'), 'utf8');
  const startAgent = async (body: Record<string, unknown> = {}): Promise<string> => {
    const runId = uniqueId('agent');
    const res = await platform.http('POST', '/agents', { org, body: { run_id: runId, goal: 'read the workspace', max_steps: 40, ...body } });
    expect(res.status).toBe(202);
    return runId;
  };
  const ledger = (commandId: string) => platform.query('SELECT 1 FROM command_ledger WHERE command_id = $1', [commandId]);

  it("finding 3: a Host the gateway does not answer for is a 421 naming nothing, before any route runs; health stays open to probes", async () => {
    const port = platform.ports.gateway;
    const runId = await startAgent({ max_steps: 1 });
    // The request: curl -H 'Host: rebind.attacker.test:8080' -H 'X-Org: demo' http://127.0.0.1:8080/runs
    const rebound = await raw(port, 'GET', '/runs', { Host: 'rebind.attacker.test:8080', 'X-Org': org });
    expect(rebound.status).toBe(421);
    expect(rebound.type).toMatch(/^application\/problem\+json/);
    expect(JSON.parse(rebound.body)).toMatchObject({ title: 'misdirected request', status: 421 });
    expect(rebound.body).not.toMatch(/rebind|attacker|localhost|127\.0\.0\.1|run_id|runs/);

    // Nothing else is reachable under that name either: a run's page, its stream, a command, the dashboard.
    for (const [method, path] of [['GET', `/runs/${runId}`], ['GET', `/runs/${runId}/events`], ['POST', `/runs/${runId}/pause`], ['GET', '/ui/'], ['GET', '/docs']]) {
      const res = await raw(port, method, path, { Host: `rebind.attacker.test:${port}`, 'X-Org': org, Cookie: 'agentrun_session=' + token });
      expect({ method, path, status: res.status }).toEqual({ method, path, status: 421 });
    }
    expect(await platform.query("SELECT 1 FROM command_ledger WHERE type = 'agent.pause'")).toHaveLength(0);

    // The names local mode listens under, any port: answered as before.
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, 'LOCALHOST']) {
      expect({ host, status: (await raw(port, 'GET', '/runs', { Host: host, 'X-Org': org })).status }).toEqual({ host, status: 200 });
    }
    // A kubelet's probe names the pod's address: /livez and /readyz are not checked.
    for (const path of ['/livez', '/readyz']) expect((await raw(port, 'GET', path, { Host: `10.244.1.7:${port}` })).status).toBe(200);
  });

  it('finding 4: a write signed in by the session cookie from another origin is a 403 and changes nothing; from the gateway\'s own origin it works', async () => {
    const session = await platform.http('POST', '/session', { headers: { Authorization: `Bearer ${token}` } });
    expect(session.status).toBe(204);
    const cookie = (session.headers.get('set-cookie') ?? '').split(';')[0];
    expect(cookie).toMatch(/^agentrun_session=[A-Za-z0-9_-]{43}$/);
    const runId = await startAgent();
    await platform.waitForStatus(org, runId, 'running');
    // Held (paused) while the refused writes are tried: the run cannot end under them, so what it is
    // afterwards is what they left. A command over HTTP is decided (and its ledger row written) before
    // the answer, so no row means nothing was done.
    await platform.holdRun(org, runId);
    const refusedKeys: string[] = [];
    const refuse = async (action: 'pause' | 'resume', headers: Record<string, string>) => {
      const key = uniqueId(`refused-${action}`);
      refusedKeys.push(key);
      const res = await platform.http('POST', `/runs/${runId}/${action}`, { headers: { Cookie: cookie, 'Idempotency-Key': key, ...headers }, body: {} });
      expect({ action, headers, status: res.status, type: res.headers.get('content-type') }).toEqual({ action, headers, status: 403, type: expect.stringMatching(/^application\/problem\+json/) });
      expect(res.body).toMatchObject({ title: 'cross-origin request', status: 403 });
    };
    // The request: POST /runs/{id}/pause with Origin: http://127.0.0.1:9999 and the session cookie;
    // and the resume that would let the held run go on.
    await refuse('pause', { Origin: 'http://127.0.0.1:9999' });
    await refuse('resume', { Origin: 'http://127.0.0.1:9999' });
    // Without Origin or Sec-Fetch-Site a cookie proves nothing about the page that sent it either.
    await refuse('pause', {});
    await refuse('resume', {});
    for (const key of refusedKeys) expect({ key, rows: await ledger(key) }).toEqual({ key, rows: [] });
    expect(await platform.query("SELECT type FROM command_ledger WHERE run_id = $1 AND type = 'agent.resume'", [runId])).toEqual([]);
    expect((await platform.http('GET', `/runs/${runId}`, { org })).body.status).toBe('paused');

    // The dashboard's own request: same origin. The resume under a refused request's key is the first
    // command of that key (accepted, not a duplicate), and the run goes on.
    const resumed = await platform.http('POST', `/runs/${runId}/resume`, { headers: { Cookie: cookie, Origin: platform.gatewayUrl, 'Idempotency-Key': refusedKeys[1] }, body: {} });
    expect(resumed.status).toBe(202);
    expect(resumed.body).toMatchObject({ outcome: 'accepted', command_id: refusedKeys[1] });
    await platform.waitForStatus(org, runId, 'running');
    // Running when the pause is sent (it had most of its 40 paced steps left when it was held), so
    // `paused` after it is this pause's doing.
    expect((await platform.http('GET', `/runs/${runId}`, { org })).body.status).toBe('running');
    const own = await platform.http('POST', `/runs/${runId}/pause`, { headers: { Cookie: cookie, Origin: platform.gatewayUrl, 'Idempotency-Key': refusedKeys[0] }, body: {} });
    expect(own.status).toBe(202);
    expect(own.body).toMatchObject({ outcome: 'accepted', command_id: refusedKeys[0] });
    await platform.waitForStatus(org, runId, 'paused');
    // And a script with the token as a bearer header, from anywhere.
    const script = await platform.http('POST', `/runs/${runId}/cancel`, { headers: { Authorization: `Bearer ${token}`, Origin: 'http://127.0.0.1:9999' }, body: {} });
    expect(script.status).toBe(202);
    await platform.waitForStatus(org, runId, 'cancelled');
  });

  it('finding 9: an internal error reaches the client, over HTTP and on the outcome topic, as an error id only; the gateway logs the detail under it', async () => {
    // The object store cannot take the org's inline dataset: where its folder should be is a file.
    // The store's error names a path on this server, which is what used to come back as the detail.
    mkdirSync(join(platform.dataDir, 'objects', 'datasets'), { recursive: true });
    writeFileSync(join(platform.dataDir, 'objects', 'datasets', org), 'not a folder');
    const key = uniqueId('eval');
    const res = await platform.http('POST', '/evals', {
      org,
      headers: { 'Idempotency-Key': key },
      body: { model: 'scripted', reviewers: ['alice'], dataset: { name: 'inline', cases: [{ id: 'a', input: '[answer: a]', target: 'a' }] } },
    });
    expect(res.status).toBe(500);
    expect(res.body).toMatchObject({ title: 'internal error', status: 500, reason: 'internal_error', command_id: key, error_id: expect.stringMatching(UUID) });
    const errorId: string = res.body.error_id;
    expect(res.body.detail).toBe(`the command failed with an unexpected error, logged under error id ${errorId}`);
    expect(JSON.stringify(res.body)).not.toMatch(/ENOTDIR|EEXIST|not a directory|test-runs|objects\/datasets|\.stack/);

    const outcome = await waitFor('the outcome record', () => outcomes.find((o) => o.value.command_id === key)?.value);
    expect(outcome).toMatchObject({ outcome: 'rejected', reason: 'internal_error', error_id: errorId, message: res.body.detail });
    const logged = gatewayLog().split('\n').find((line) => line.includes(errorId));
    expect(logged).toMatch(/ENOTDIR|EEXIST|not a directory/);
  });

  it('finding 9: a snapshot row over HTTP gives the archive link, never a file:// URL or a server path; the link downloads it', async () => {
    const runId = await startAgent({ max_steps: 2, snapshots: { at_end: true } });
    await platform.waitForStatus(org, runId, 'done');
    const manifest = await waitFor('the final snapshot in the manifest', async () => {
      const res = await platform.http('GET', `/runs/${runId}/snapshots`, { org });
      return res.status === 200 && (res.body.items as SnapshotRow[]).some((r) => r.is_final) && res;
    });
    const text = JSON.stringify(manifest.body);
    expect(text).not.toMatch(/file:|s3:|test-runs|\.stack|objects\//);
    const final = (manifest.body.items as SnapshotRow[]).find((r) => r.is_final)!;
    expect(final.bundle_object_url).toBe(`/runs/${runId}/snapshots/${final.snapshot_id}/archive`);
    const archive = await fetch(platform.gatewayUrl + final.bundle_object_url, { headers: { 'X-Org': org } });
    expect(archive.status).toBe(200);
    expect(archive.headers.get('content-type')).toBe('application/gzip');
    expect((await archive.arrayBuffer()).byteLength).toBeGreaterThan(0);
    // The event, as GET /runs/{id} and the stream show it, says the same; Kafka's copy keeps the location.
    const detail = await platform.http('GET', `/runs/${runId}`, { org });
    expect(JSON.stringify(detail.body)).not.toMatch(/file:|test-runs/);
    const stream = new SseClient(`${platform.gatewayUrl}/runs/${runId}/events`, { 'X-Org': org });
    await stream.finished();
    expect(stream.frames.map((f) => f.data).join('\n')).not.toMatch(/file:|test-runs/);
    const stored = await platform.query<{ row: SnapshotRow }>('SELECT row FROM snapshots WHERE org = $1 AND run_id = $2 AND snapshot_id = $3', [org, runId, final.snapshot_id]);
    expect(stored[0].row.bundle_object_url).toMatch(/^file:/);
  });

  it("finding 9: an SSE error frame carries an error id, not the database's words", async () => {
    const runId = await startAgent();
    await platform.waitForStatus(org, runId, 'running');
    expect((await platform.http('POST', `/runs/${runId}/pause`, { org, body: {} })).status).toBe(202);
    await platform.waitForStatus(org, runId, 'paused');
    const stream = new SseClient(`${platform.gatewayUrl}/runs/${runId}/events`, { 'X-Org': org });
    await waitFor('the stream up to the pause', () => stream.events().some((e) => e.payload.state?.status === 'paused'));

    // The stream's next read waits on a lock the test holds, and is then cancelled, as a server-side
    // timeout or an operator would: Postgres answers "canceling statement due to user request".
    const locker = new PgClient({ connectionString: stackUrls().databaseUrl(platform.database) });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE run_events IN ACCESS EXCLUSIVE MODE');
      await platform.query("SELECT pg_notify('agentrun_run_events', '*')");
      const waiting = await waitFor('the stream waiting on the lock', async () => {
        const rows = await platform.query<{ pid: number }>(
          // The live streams' reads (ReadModel.eventsAfter and eachEventsAfter) name the table `ev`.
          "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock' AND query LIKE '%FROM run_events ev%'",
          [platform.database],
        );
        return rows.length > 0 && rows;
      }, 20_000, 50);
      for (const { pid } of waiting) await platform.query('SELECT pg_cancel_backend($1)', [pid]);
      await stream.finished();
    } finally {
      await locker.query('ROLLBACK').catch(() => undefined);
      await locker.end();
    }
    const errorFrames = stream.frames.filter((f) => f.event === 'error');
    expect(errorFrames).toHaveLength(1);
    const data = JSON.parse(errorFrames[0].data);
    expect(data).toEqual({ error_id: expect.stringMatching(UUID) });
    expect(gatewayLog().split('\n').find((line) => line.includes(data.error_id))).toMatch(/canceling statement/);
    expect((await platform.http('POST', `/runs/${runId}/cancel`, { org, body: {} })).status).toBe(202);
  });

  it("finding 9: /readyz says which checks failed, never a dependency's error; each service logs it; ready again after", async () => {
    // Every service's Postgres connections end and none may open: each check fails with Postgres's own
    // words. Only this platform's database (the stack's own is where the switch is made), and the
    // test's connection stays.
    const [{ pid: ours }] = await platform.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    const admin = new PgClient({ connectionString: stackUrls().databaseUrl() });
    await admin.connect();
    try {
      await admin.query(`ALTER DATABASE ${platform.database} ALLOW_CONNECTIONS false`);
      await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> $2', [platform.database, ours]);
      const answers: Partial<Record<string, string>> = {};
      for (const app of APPS) {
        const answer = await waitFor(`${app} not ready`, async () => {
          const res = await fetch(`http://127.0.0.1:${platform.ports[app]}/readyz`);
          return res.status === 503 && { status: res.status, text: await res.text() };
        }, 30_000, 200);
        expect({ app, leaked: /accepting connections|terminat|database "|agentrun_t|ECONN|127\.0\.0\.1|5432/.test(answer.text) }).toEqual({ app, leaked: false });
        answers[app] = answer.text;
      }
      // Every app but the gateway (whose answer is checked above for leaks only) names its failed check.
      const checked = APPS.filter((app) => app !== 'gateway');
      expect(Object.fromEntries(checked.map((app) => [app, JSON.parse(answers[app] ?? 'null')]))).toEqual(
        Object.fromEntries(checked.map((app) => [app, expect.objectContaining({ status: 'not_ready', checks: expect.objectContaining({ postgres: 'failed' }) })])),
      );
    } finally {
      await admin.query(`ALTER DATABASE ${platform.database} ALLOW_CONNECTIONS true`);
      await admin.end();
    }
    for (const app of APPS) {
      await waitFor(`${app} ready again`, async () => (await fetch(`http://127.0.0.1:${platform.ports[app]}/readyz`)).status === 200, 60_000, 250);
      const log = readFileSync(join(platform.dataDir, 'logs', `${app}.log`), 'utf8');
      expect({ app, logged: /postgres is not ready: .*(accepting connections|terminat)/.test(log) }).toEqual({ app, logged: true });
    }
  });
});
