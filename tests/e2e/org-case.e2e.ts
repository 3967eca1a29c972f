import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { snapshotObjectKeys, TOPICS, type CommandOutcome, type SnapshotRow } from '@agentrun/contracts';
import { hashToken, TOKEN_PREFIX } from '@agentrun/persistence';
import { Platform, uniqueId, type TopicRecord } from '../support/platform';
import { SseClient } from '../support/sse';
import { stackUrls } from '../support/stack-env';
import { tokenCli } from '../support/token-cli';
import { waitFor } from '../support/wait';

/**
 * Issue 16, finding 10: orgs that differ only in case were two orgs to the database but one directory
 * on a case-insensitive filesystem, so `Acme` could reach `acme`'s workspaces and objects. Now every
 * way an org comes in (X-Org, a token, a Kafka command, the token CLI) lowercases it, so they are one
 * org everywhere. Local mode, where both X-Org and tokens are accepted.
 */
describe('orgs that differ only in case are one org', () => {
  const platform = new Platform();
  const org = uniqueId('case');
  const upper = org.toUpperCase();
  const mixed = `${org[0].toUpperCase()}${org.slice(1)}`;
  let outcomes: TopicRecord<CommandOutcome>[];
  let databaseUrl: string;
  /** Started with `X-Org: <mixed>`, read in every spelling below. */
  const sharedRun = uniqueId('shared');

  beforeAll(async () => {
    await platform.start();
    outcomes = await platform.follow<CommandOutcome>(TOPICS.commandResults);
    databaseUrl = stackUrls().databaseUrl(platform.database);
  });
  afterAll(() => platform.stop());

  const outcomeOf = (commandId: string) =>
    waitFor(`the outcome of ${commandId}`, () => outcomes.find((o) => o.value.command_id === commandId)?.value);
  const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });
  /**
   * Every spelling of the org used as a directory name anywhere under `root` (workspaces, or the
   * object store, where keys may start `payloads/{org}/...` as well as `{org}/...`).
   */
  const orgSpellingsUnder = (root: string): string[] => {
    const found = new Set<string>();
    const walk = (dir: string) => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        if (!entry.isDirectory()) continue;
        if (entry.name.toLowerCase() === org) found.add(entry.name);
        walk(join(dir, entry.name));
      }
    };
    walk(root);
    return [...found];
  };

  it('X-Org: Acme and X-Org: acme see the same run, kept once under the lowercase org', async () => {
    // With its final snapshot, so the object store has something under the org too.
    const started = await platform.http('POST', '/agents', { org: mixed, body: { run_id: sharedRun, goal: 'one org', max_steps: 2, snapshots: {} } });
    expect(started.status).toBe(202);
    await platform.waitForStatus(org, sharedRun, 'done');

    for (const as of [org, upper, mixed]) {
      const run = await platform.http('GET', `/runs/${sharedRun}`, { org: as });
      expect({ as, status: run.status, run_id: run.body.run_id }).toEqual({ as, status: 200, run_id: sharedRun });
      const list = await platform.http('GET', '/runs?limit=200', { org: as });
      expect({ as, ids: list.body.runs.map((r: { run_id: string }) => r.run_id) }).toEqual({ as, ids: [sharedRun] });
    }
    const stream = new SseClient(`${platform.gatewayUrl}/runs/${sharedRun}/events`, { 'X-Org': upper });
    await stream.finished();
    expect(stream.status).toBe(200);
    expect(stream.frames[stream.frames.length - 1].event).toBe('end');

    // Another spelling cannot start a second run under the same id: it is the same run.
    const again = await platform.http('POST', '/agents', { org: upper, body: { run_id: sharedRun, goal: 'a twin', max_steps: 1 } });
    expect(again.status).toBe(409);
    expect(again.body.reason).toBe('run_exists');

    expect(await platform.query('SELECT org, run_id FROM runs')).toEqual([{ org, run_id: sharedRun }]);
    // One workspace directory, named by the lowercase org.
    expect(orgSpellingsUnder(platform.workspaceRoot())).toEqual([org]);
    expect(existsSync(join(platform.workspaceRoot(), org, sharedRun, 'goal.md'))).toBe(true);

    // The final snapshot's objects are under the lowercase org, and every spelling downloads them.
    const manifest = await waitFor('the final snapshot', async () => {
      const res = await platform.http('GET', `/runs/${sharedRun}/snapshots`, { org: upper });
      return res.body.items?.find((row: SnapshotRow) => row.is_final && row.bundle_object_url) as SnapshotRow | undefined;
    });
    expect(orgSpellingsUnder(join(platform.dataDir, 'objects'))).toEqual([org]);
    expect(existsSync(join(platform.dataDir, 'objects', snapshotObjectKeys(org, sharedRun, manifest.snapshot_id).archive))).toBe(true);
    for (const as of [org, upper, mixed]) {
      const res = await fetch(`${platform.gatewayUrl}/runs/${sharedRun}/snapshots/${manifest.snapshot_id}/archive`, { headers: { 'X-Org': as } });
      expect({ as, status: res.status }).toEqual({ as, status: 200 });
      await res.arrayBuffer();
    }
  });

  it('a token created for ACME acts for acme, and so does one stored with capitals before orgs were lowercased', async () => {
    const created = await tokenCli(databaseUrl, 'create', '--org', upper, '--label', 'upper');
    expect(created.code).toBe(0);
    expect(created.stdout).toMatch(new RegExp(`^org: +${org}$`, 'm'));
    const token = /^token: (ar_\S+)$/m.exec(created.stdout)?.[1] ?? '';
    expect(await platform.query('SELECT org FROM api_tokens')).toEqual([{ org }]);
    const listed = await tokenCli(databaseUrl, 'list', '--org', mixed);
    // org, subject, state: the list names the lowercase org whatever spelling asked for it.
    expect(listed.stdout).toMatch(new RegExp(`\\t${org}\\t[^\\t]+\\tactive\\t`));

    // A row as an older CLI wrote it, with the org as typed.
    const legacy = `${TOKEN_PREFIX}legacy-${uniqueId('t')}`;
    await platform.query('INSERT INTO api_tokens (id, org, token_hash, label) VALUES ($1, $2, $3, $4)', ['tok_00000000000000aa', upper, hashToken(legacy), 'legacy']);

    for (const [what, headers] of [
      ['the new token', bearer(token)],
      ['the legacy token', bearer(legacy)],
      ['the new token and another X-Org', { ...bearer(token), 'X-Org': 'someone-else' }],
    ] as const) {
      const run = await platform.http('GET', `/runs/${sharedRun}`, { headers });
      expect({ what, status: run.status }).toEqual({ what, status: 200 });
    }
    // A session cookie made from the legacy token is the same org too.
    const session = await platform.http('POST', '/session', { headers: bearer(legacy) });
    expect(session.status).toBe(204);
    // The cookie holds the session the legacy token opened (its name=value pair), not the token.
    const cookie = (session.headers.get('set-cookie') ?? '').split(';')[0];
    expect(cookie).toMatch(/^agentrun_session=/);
    const byCookie = await platform.http('GET', '/runs?limit=200', { headers: { Cookie: cookie } });
    expect(byCookie.body.runs.map((r: { run_id: string }) => r.run_id)).toEqual([sharedRun]);

    // What the token starts lands in acme, where X-Org: acme sees it.
    const viaToken = uniqueId('bytoken');
    expect((await platform.http('POST', '/agents', { headers: bearer(legacy), body: { run_id: viaToken, goal: 'by token', max_steps: 1 } })).status).toBe(202);
    await platform.waitForStatus(org, viaToken, 'done');
    expect((await platform.http('GET', `/runs/${viaToken}`, { org })).status).toBe(200);
  });

  it("a Kafka command naming ACME controls acme's run, and its outcome names acme", async () => {
    const runId = uniqueId('long');
    expect((await platform.http('POST', '/agents', { org, body: { run_id: runId, goal: 'long one', max_steps: 400 } })).status).toBe(202);
    await platform.waitForStatus(org, runId, 'running');

    const pause = uniqueId('c');
    await platform.publishCommand({ command_id: pause, type: 'agent.pause', org: upper, run_id: runId, payload: {} });
    await platform.waitForStatus(org, runId, 'paused');
    expect(await outcomeOf(pause)).toMatchObject({ org, run_id: runId, type: 'agent.pause', outcome: 'accepted' });

    // A start in another spelling is a second start of the same run, and a rejection names acme too.
    const twin = uniqueId('c');
    await platform.publishCommand({ command_id: twin, type: 'agent.start', org: mixed, run_id: runId, payload: { goal: 'a twin', max_steps: 1 } });
    expect(await outcomeOf(twin)).toMatchObject({ org, outcome: 'rejected', reason: 'run_exists' });

    const cancel = uniqueId('c');
    await platform.publishCommand({ command_id: cancel, type: 'agent.cancel', org: mixed, run_id: runId, payload: {} });
    await platform.waitForStatus(org, runId, 'cancelled');
    expect(await outcomeOf(cancel)).toMatchObject({ org, outcome: 'accepted' });
    // The same command id again in a third spelling is the same command, answered as a duplicate.
    await platform.publishCommand({ command_id: cancel, type: 'agent.cancel', org, run_id: runId, payload: {} });
    await waitFor('the duplicate', () => outcomes.filter((o) => o.value.command_id === cancel).length === 2);
    expect(outcomes.filter((o) => o.value.command_id === cancel).map((o) => [o.value.org, o.value.outcome])).toEqual([
      [org, 'accepted'],
      [org, 'duplicate'],
    ]);
  });

  it('after all of that, every row, event, outcome and workspace names the one lowercase org', async () => {
    // (api_tokens keeps the legacy row above as it was written; reading it is what is normalised.)
    for (const table of ['runs', 'run_events', 'command_ledger', 'snapshots']) {
      const orgs = await platform.query<{ org: string }>(`SELECT DISTINCT org FROM ${table}`);
      expect({ table, orgs: orgs.map((r) => r.org) }).toEqual({ table, orgs: [org] });
    }
    expect([...new Set(outcomes.map((o) => o.value.org))]).toEqual([org]);
    expect(orgSpellingsUnder(platform.workspaceRoot())).toEqual([org]);
    expect(orgSpellingsUnder(join(platform.dataDir, 'objects'))).toEqual([org]);
  });
});
