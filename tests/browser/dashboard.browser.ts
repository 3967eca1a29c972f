import { readFileSync } from 'node:fs';
import type { RunEventEnvelope, RunStatus } from '@agentrun/contracts';
import { applyRunEvents, createDataSource } from '@agentrun/persistence';
import type { Browser, Locator, Page } from 'playwright-core';
import type { DataSource } from 'typeorm';
import { artifactPath, createToken, launchChromium, OpenedPages, signIn, type WatchedPage } from '../support/browser';
import { Platform, uniqueId } from '../support/platform';
import { stackUrls } from '../support/stack-env';
import { waitFor } from '../support/wait';

/** Waits for the run page's status badge to say `status`. */
const untilStatus = (page: Page, status: string, timeout = 90_000) => page.locator(`.run-header .badge[data-status="${status}"]`).waitFor({ timeout });
const timelineSeqs = (page: Page): Promise<number[]> => page.locator('ol.timeline > li').evaluateAll((items) => items.map((li) => Number(li.getAttribute('data-seq'))));
const untilCount = (what: string, locator: Locator, atLeast: number, timeout = 60_000) =>
  waitFor(what, async () => (await locator.count()) >= atLeast, timeout, 100);

describe('the dashboard in Chromium', () => {
  // Each tool call takes 4 ticks of 250 ms, so a run lasts long enough to be steered from the page.
  const platform = new Platform({ TOOL_PACE_TICKS: '4', TOOL_PACE_MS: '250' });
  const org = uniqueId('web');
  const otherOrg = uniqueId('other');
  let browser: Browser;
  let token: string;
  let otherToken: string;
  let strangerToken: string;
  const opened = new OpenedPages();
  let firstRunId = '';

  beforeAll(async () => {
    [browser] = await Promise.all([launchChromium(), platform.start()]);
    const databaseUrl = stackUrls().databaseUrl(platform.database);
    // The person signed in approves evals as the token's subject.
    token = await createToken(databaseUrl, org, 'alice');
    strangerToken = await createToken(databaseUrl, org, 'mallory');
    otherToken = await createToken(databaseUrl, otherOrg);
  });
  afterAll(async () => {
    await browser?.close();
    await platform.stop();
  });
  afterEach(async () => {
    // Nothing the page did threw, and the CSP refused nothing (either would be a console error).
    expect(await opened.closeAll()).toEqual([]);
  });

  const open = (): Promise<WatchedPage> => opened.open(browser, platform.gatewayUrl);

  const signedIn = async (withToken = token): Promise<Page> => {
    const { page } = await open();
    await signIn(page, withToken);
    return page;
  };

  const startAgent = async (maxSteps: number, goal = 'read the workspace'): Promise<string> => {
    const runId = uniqueId('agent');
    const res = await platform.http('POST', '/agents', { org, body: { run_id: runId, goal, max_steps: maxSteps } });
    expect(res.status).toBe(202);
    return runId;
  };

  it('serves the dashboard at /ui/ beside the API, which keeps its routes', async () => {
    const get = (path: string) => fetch(platform.gatewayUrl + path, { redirect: 'manual' });
    const root = await get('/');
    expect([root.status, root.headers.get('location')]).toEqual([302, '/ui/']);
    expect((await get('/ui')).headers.get('location')).toBe('/ui/');
    for (const path of ['/ui/', '/ui/runs/some-run', '/ui/runs/a.run.with.dots']) {
      const page = await get(path);
      expect({ path, status: page.status, type: page.headers.get('content-type') }).toEqual({ path, status: 200, type: expect.stringMatching(/^text\/html/) });
      expect(page.headers.get('content-security-policy')).toMatch(/default-src 'self'/);
    }
    expect((await get('/ui/app.js')).headers.get('content-type')).toMatch(/javascript/);
    expect((await get('/ui/app.css')).headers.get('content-type')).toMatch(/^text\/css/);
    const missing = await get('/ui/nothing.js');
    expect([missing.status, missing.headers.get('content-type')]).toEqual([404, expect.stringMatching(/problem\+json/)]);
    // The API is untouched: docs and health open, runs still need an org.
    expect((await get('/docs')).status).toBe(200);
    expect((await get('/livez')).status).toBe(200);
    expect((await get('/readyz')).status).toBe(200);
    expect((await get('/runs')).status).toBe(401);
  });

  it('starts an agent run from the page and watches it reach done', async () => {
    const page = await signedIn();
    firstRunId = uniqueId('from-page');
    await page.locator('summary', { hasText: 'Start a run' }).click();
    const form = page.getByRole('form', { name: 'Start a run' });
    await form.getByLabel('Run id').fill(firstRunId);
    await form.getByLabel('Goal', { exact: true }).fill('map the workspace from the dashboard');
    await form.getByLabel('Max steps').fill('4');
    await form.getByRole('button', { name: 'Start agent run' }).click();
    await page.waitForURL(`**/ui/runs/${firstRunId}`);
    await untilStatus(page, 'done');

    const run = await platform.http('GET', `/runs/${firstRunId}`, { org });
    expect(run.body).toMatchObject({ status: 'done', state: { step: 4, max_steps: 4 } });
    await page.locator('[data-testid="stream-status"][data-stream="ended"]').waitFor();
    expect(await timelineSeqs(page)).toEqual(Array.from({ length: run.body.last_seq }, (_, i) => run.body.last_seq - i));
    expect(await page.getByTestId('agent-goal').textContent()).toBe('map the workspace from the dashboard');
    expect(await page.getByTestId('agent-step').textContent()).toContain('4 of 4');
    // The steps per lane: the model, then a CPU tool and a GPU tool on their task queues.
    await page.getByTestId('chart-step-durations').locator('canvas').waitFor();
    const lanes = await page.locator('.lane-table tbody th').allTextContents();
    expect(lanes).toEqual(expect.arrayContaining(['model', `${platform.prefix}cpu-tools`, `${platform.prefix}gpu-tools`]));
    await page.screenshot({ path: artifactPath('dashboard-run-page.png'), fullPage: true });
  });

  it('lists a run\'s snapshots, downloads an archive, browses its files, forks a new run from one and compares them', async () => {
    const page = await signedIn();
    const runId = uniqueId('snapped');
    await page.locator('summary', { hasText: 'Start a run' }).click();
    const form = page.getByRole('form', { name: 'Start a run' });
    await form.getByLabel('Run id').fill(runId);
    await form.getByLabel('Goal', { exact: true }).fill('leave snapshots behind');
    await form.getByLabel('Max steps').fill('3');
    await form.getByLabel('Snapshots').selectOption('turns');
    await form.getByRole('button', { name: 'Start agent run' }).click();
    await page.waitForURL(`**/ui/runs/${runId}`);
    await untilStatus(page, 'done');

    const items = await waitFor('the final snapshot in the manifest', async () => {
      const res = await platform.http('GET', `/runs/${runId}/snapshots`, { org });
      const rows = (res.status === 200 ? res.body.items : []) as { snapshot_id: string; turn?: number; is_final: boolean }[];
      return rows.some((r) => r.is_final) && rows;
    });
    const rows = page.locator('.snapshots tbody tr');
    await untilCount('every snapshot on the page', rows, items.length);
    expect(await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-snapshot-id')))).toEqual(items.map((r) => r.snapshot_id));

    const final = items[items.length - 1].snapshot_id;
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: `Download the archive of ${final}` }).click()]);
    expect(download.suggestedFilename()).toBe(`${runId}-${final}.tar.gz`);
    const bytes = readFileSync(await download.path());
    expect([bytes[0], bytes[1]]).toEqual([0x1f, 0x8b]); // gzip
    expect(await page.getByTestId('outcome-download').textContent()).toContain(`${runId}-${final}.tar.gz`);

    // The files of the final snapshot, read out of its archive by the gateway, and one of them shown.
    await page.getByRole('button', { name: `Browse the files of ${final}` }).click();
    const files = page.getByRole('list', { name: `Files of ${final}` });
    await files.locator('li[data-path="goal.md"]').waitFor();
    const listed = (await platform.http('GET', `/runs/${runId}/snapshots/${final}/files?limit=1000`, { org })).body.items as { path: string }[];
    expect(await files.locator('li').evaluateAll((lis) => lis.map((li) => li.getAttribute('data-path')))).toEqual(listed.map((e) => e.path));
    await files.getByRole('button', { name: 'goal.md' }).click();
    await page.getByTestId('file-view').locator('pre').waitFor();
    expect(await page.getByTestId('file-view').locator('pre').textContent()).toBe('# Goal\n\nleave snapshots behind\n');
    await page.screenshot({ path: artifactPath('dashboard-snapshot-files.png'), fullPage: true });
    await page.getByRole('button', { name: 'Close the files' }).click();

    const second = items.find((r) => r.turn === 2);
    expect(second).toMatchObject({ turn: 2, step: 2 });
    await page.getByRole('button', { name: `Fork from ${second!.snapshot_id}` }).click();
    await page.locator('#fork-goal').fill('go on from the second turn');
    expect(await page.locator('#fork-snapshot').inputValue()).toBe(second!.snapshot_id);
    await page.getByRole('button', { name: 'Fork run' }).click();
    const opened = page.getByTestId('outcome-fork').getByRole('link', { name: /^Open / });
    await opened.waitFor();
    const forkId = ((await opened.textContent()) ?? '').replace(/^Open /, '');
    await opened.click();
    await page.waitForURL(`**/ui/runs/${forkId}`);
    await untilStatus(page, 'done');
    expect(await page.locator('.run-header .facts').textContent()).toContain(`Forked from${runId} at ${second!.snapshot_id}`);
    expect(await page.getByTestId('agent-goal').textContent()).toBe('go on from the second turn');

    // The fork against its parent: where they went different ways, and their final workspaces.
    const { body: runDiff } = await platform.http('GET', `/runs/${forkId}/diff?with=${runId}`, { org });
    await page.getByTestId('fork-diff').getByTestId('first-divergent-step').waitFor();
    // The scripted policy is deterministic and its outputs follow the goal: the fork's own first step,
    // at its fork point, is already different.
    expect(runDiff).toMatchObject({ first_divergent_step: 2, steps_shared: 2, fork: { parent: runId, child: forkId, snapshot_id: second!.snapshot_id, step: 2 } });
    expect(await page.getByTestId('first-divergent-step').textContent()).toContain('First different step: 2');
    // The fork started from the page takes no snapshots of its own: there is no final workspace to compare.
    expect(runDiff.final_files).toBeNull();
    expect(await page.getByTestId('fork-diff').textContent()).toContain('No final snapshot on both sides to compare yet.');
    await page.screenshot({ path: artifactPath('dashboard-fork-diff.png'), fullPage: true });

    // Two snapshots of the parent compared on its page.
    await page.getByTestId('fork-diff').getByRole('link', { name: runId }).click();
    await page.waitForURL(`**/ui/runs/${runId}`);
    const compare = page.getByRole('form', { name: 'Compare two snapshots' });
    await compare.getByLabel('From').selectOption(items[0].snapshot_id);
    await compare.getByLabel('To').selectOption(final);
    await compare.getByRole('button', { name: 'Compare' }).click();
    await page.getByTestId('snapshot-diff').waitFor();
    const { body: snapDiff } = await platform.http('GET', `/runs/${runId}/snapshots/${items[0].snapshot_id}/diff/${final}`, { org });
    const snapPaths = [...snapDiff.files.added, ...snapDiff.files.removed, ...snapDiff.files.changed].map((e: { path: string }) => e.path);
    expect(snapPaths.length).toBeGreaterThan(0);
    expect(await page.getByTestId('snapshot-diff').locator('li').evaluateAll((lis) => lis.map((li) => li.getAttribute('data-path')))).toEqual(snapPaths);
  });

  it("shows an llm run's answer at the top and its conversation as a transcript, tool calls folded", async () => {
    const runId = uniqueId('llm');
    expect((await platform.http('POST', '/agents', { org, body: { run_id: runId, goal: 'find the parser notes', max_steps: 8, policy: 'llm' } })).status).toBe(202);
    const page = await signedIn();
    await page.goto(`/ui/runs/${runId}`);
    await untilStatus(page, 'done');
    const { body: detail } = await platform.http('GET', `/runs/${runId}`, { org });
    await page.getByTestId('run-answer').waitFor();
    expect(await page.getByTestId('run-answer').locator('p').textContent()).toBe(detail.state.answer);

    const { body: conversation } = await platform.http('GET', `/runs/${runId}/conversation`, { org });
    const messages = page.getByTestId('transcript').locator('li.message');
    await untilCount('every message in the transcript', messages, conversation.messages.length);
    expect(await messages.evaluateAll((lis) => lis.map((li) => li.getAttribute('data-role')))).toEqual(conversation.messages.map((m: { role: string }) => m.role));
    // A tool call is folded: its arguments show once it is opened.
    const call = page.getByTestId('transcript').locator('details.tool-call').first();
    expect(await call.locator('pre').isVisible()).toBe(false);
    await call.locator('summary').click();
    expect(JSON.parse((await call.locator('pre').textContent()) ?? '')).toEqual(expect.any(Object));
    await page.screenshot({ path: artifactPath('dashboard-conversation.png'), fullPage: true });
  });

  it('pauses and resumes a run from the keyboard, and it still reaches done', async () => {
    // Long enough that signing in, the Tab walk and the pause all land mid-run, and steps remain after the resume.
    const runId = await startAgent(24);
    const page = await signedIn();
    await page.goto(`/ui/runs/${runId}`);
    await untilStatus(page, 'running');

    // Reachable by Tab, with a visible focus ring, and pressed with Enter.
    const pause = page.getByRole('button', { name: 'Pause' });
    await pause.waitFor();
    await waitFor('Tab to reach the Pause button', async () => {
      await page.keyboard.press('Tab');
      return (await page.locator(':focus').textContent())?.trim() === 'Pause';
    }, 20_000, 0);
    expect(await page.evaluate('getComputedStyle(document.activeElement).outlineStyle')).not.toBe('none');
    await page.keyboard.press('Enter');
    await untilStatus(page, 'paused', 30_000);
    expect(await page.getByTestId('stream-status').textContent()).toContain('status paused');

    await page.getByRole('button', { name: 'Resume' }).click();
    await untilStatus(page, 'running', 30_000);
    await untilStatus(page, 'done');
    const statuses = await page.locator('ol.timeline > li[data-type="status_changed"] .desc').allTextContents();
    expect(statuses).toEqual(expect.arrayContaining(['status: paused', 'status: running']));
    expect(await page.getByTestId('outcome-buttons').textContent()).toMatch(/resume: accepted/);
  });

  it('a rejected goal change shows the validator\'s message as the gateway gave it', async () => {
    // With the GPU lane unserved the run waits on its first GPU step, so once cancelled it stays
    // `cancelling` (the step must finish first), which is when the Update validator refuses a goal.
    await platform.stopApp('gpu-worker');
    try {
      const runId = await startAgent(6, 'a goal that will be cut short');
      const page = await signedIn();
      await page.goto(`/ui/runs/${runId}`);
      await untilCount('the CPU step before the GPU one', page.locator('ol.timeline > li[data-type="step_completed"]'), 2);
      await page.getByRole('button', { name: 'Cancel run' }).click();
      await untilStatus(page, 'cancelling', 30_000);

      await page.getByLabel('New goal', { exact: true }).fill('a goal that comes too late');
      await page.getByRole('button', { name: 'Change goal' }).click();
      const alert = page.getByTestId('outcome-change-goal').getByRole('alert');
      await alert.locator('.error').waitFor();
      expect(await alert.textContent()).toBe('422 validator rejected: the run is cancelling; its goal can no longer change');
      expect(await page.getByTestId('agent-goal').textContent()).toBe('a goal that will be cut short');
    } finally {
      await platform.startApp('gpu-worker');
    }
  });

  it("an eval run's grid fills in, a stranger cannot approve it, and a listed reviewer publishes it", async () => {
    const page = await signedIn();
    const runId = uniqueId('eval-from-page');
    await page.locator('summary', { hasText: 'Start a run' }).click();
    const form = page.getByRole('form', { name: 'Start a run' });
    await form.getByLabel('Eval run').check();
    await form.getByLabel('Run id').fill(runId);
    await form.getByLabel('Model', { exact: true }).fill('m-web');
    await form.getByLabel('Cases', { exact: true }).fill('12');
    await form.getByLabel('Fail fraction').fill('0.25');
    await form.getByLabel('Reviewers').fill('alice, bob');
    await form.getByRole('button', { name: 'Start eval run' }).click();
    await page.waitForURL(`**/ui/runs/${runId}`);

    const cells = page.locator('ul.case-grid > li');
    await untilCount('twelve cases in the grid', cells, 12);
    await untilStatus(page, 'awaiting_review', 120_000);
    const finished = await cells.evaluateAll((items) => items.map((li) => li.getAttribute('data-case-status')));
    expect(finished.every((s) => s === 'ok' || s === 'failed')).toBe(true);
    const state = (await platform.http('GET', `/runs/${runId}`, { org })).body.state;
    expect(finished.filter((s) => s === 'failed')).toHaveLength(state.counts.failed);
    expect(await page.getByTestId('eval-score').textContent()).toBe(state.score.toFixed(3));
    expect(await page.getByTestId('eval-done').textContent()).toContain('12 of 12');
    await page.getByTestId('chart-case-scores').locator('canvas').waitFor();

    // A token of the org made for someone not listed: the page approves as its subject, and the run refuses.
    const stranger = await signedIn(strangerToken);
    await stranger.goto(`/ui/runs/${runId}`);
    expect(await stranger.getByTestId('approve-as').textContent()).toBe('You approve as mallory.');
    await stranger.getByRole('button', { name: 'Approve as mallory' }).click();
    await stranger.getByTestId('outcome-approve').locator('.error').waitFor();
    expect(await stranger.getByTestId('outcome-approve').textContent()).toBe("422 not a reviewer: 'mallory' is not a reviewer of this run");

    expect(await page.getByTestId('who').textContent()).toBe(`Signed in as alice (org ${org})`);
    await page.getByRole('button', { name: 'Approve as alice' }).click();
    await untilStatus(page, 'published', 30_000);
    expect(await page.getByTestId('approved-by').textContent()).toBe('alice');
    await page.screenshot({ path: artifactPath('dashboard-eval-run-page.png'), fullPage: true });

    // Retry failed: a new run over the failed cases, linked; or, when no case failed (a run's cases roll
    // their failures from its id), the gateway's reason there is none. The outcome line says which, in full.
    await page.getByRole('button', { name: 'Retry failed cases' }).click();
    const retry = page.getByTestId('outcome-retry');
    await retry.locator('p').waitFor();
    const retried = retry.getByRole('link', { name: `Open ${runId}-retry-1` });
    const anyFailed = state.counts.failed > 0;
    expect({ links: await retried.count(), noneToRetry: /no failed or ungraded cases/.test((await retry.textContent()) ?? '') }).toEqual({ links: anyFailed ? 1 : 0, noneToRetry: !anyFailed });
    if (anyFailed) {
      await retried.click();
      await page.waitForURL(`**/ui/runs/${runId}-retry-1`);
      await untilCount('the retried cases', page.locator('ul.case-grid > li'), state.counts.failed);
    }
  });

  it('a reload mid-run and a dropped connection each pick up where they were: every event shows once', async () => {
    // Local mode without a token: the org goes out as X-Org, the live stream included.
    const { page } = await open();
    await page.goto('/ui/');
    await page.getByLabel('Org', { exact: true }).fill(org);
    await page.getByRole('button', { name: 'Use this org' }).click();
    expect(await page.getByTestId('who').textContent()).toBe(`Org ${org} (local mode, X-Org)`);

    const runId = await startAgent(30);
    await page.goto(`/ui/runs/${runId}`);
    const items = page.locator('ol.timeline > li');
    await untilCount('a few events', items, 4);
    await page.reload();
    await untilCount('the events again after the reload', items, 5);
    // Read once: the run goes on, so a count taken after the seqs may include an event that came since.
    const afterReload = await timelineSeqs(page);
    expect(new Set(afterReload).size).toBe(afterReload.length);

    // The gateway goes away mid-stream and comes back: the page resumes after its last event.
    await platform.stopApp('gateway');
    await page.locator('[data-testid="stream-status"][data-stream="reconnecting"]').waitFor();
    await platform.startApp('gateway');
    await untilStatus(page, 'done', 120_000);
    await page.locator('[data-testid="stream-status"][data-stream="ended"]').waitFor();

    const run = await platform.http('GET', `/runs/${runId}`, { org });
    const seqs = await timelineSeqs(page);
    expect(seqs).toEqual(Array.from({ length: run.body.last_seq }, (_, i) => run.body.last_seq - i));
  });

  it("another org's run URL shows not found, and its runs are not listed", async () => {
    const page = await signedIn(otherToken);
    await page.getByText('No runs yet.').waitFor();
    expect(await page.locator('table.runs tbody tr').count()).toBe(0);
    await page.goto(`/ui/runs/${firstRunId}`);
    await page.getByRole('heading', { level: 1, name: 'Run not found' }).waitFor();
    expect(await page.getByTestId('run-not-found').textContent()).toContain(`no run '${firstRunId}' in org ${otherOrg}`);
  });

  it('the runs page lists both kinds newest first, filters them, scrolls through every page, and moves badges live', async () => {
    // Forty older finished runs, written into the read model as the projector would.
    const db: DataSource = createDataSource({ url: stackUrls().databaseUrl(platform.database), poolSize: 2, applicationName: 'dashboard-browser' });
    await db.initialize();
    try {
      const base = Date.parse('2026-01-01T00:00:00.000Z');
      const seeded = Array.from({ length: 40 }, (_, i): RunEventEnvelope => {
        const kind = i % 2 ? 'eval' : 'agent';
        const status: RunStatus = kind === 'eval' ? (i % 4 === 1 ? 'published' : 'failed') : i % 4 === 0 ? 'done' : 'cancelled';
        const state = kind === 'eval' ? { status, model: `m-seed-${i % 3}`, suite: 'seeded', total: 4, done: 4 } : { status, goal: `seeded goal ${i}`, step: 2, max_steps: 2 };
        return { run_id: `seed-${String(i).padStart(2, '0')}`, org, kind, seq: 1, type: 'run_finished', ts: new Date(base + i * 1000).toISOString(), payload: { state } };
      });
      await applyRunEvents(db, seeded);
    } finally {
      await db.destroy();
    }
    const all = (await platform.http('GET', '/runs?limit=200', { org })).body.runs.map((r: { run_id: string }) => r.run_id);
    expect(all.length).toBeGreaterThan(40);

    const page = await signedIn();
    const rows = page.locator('table.runs tbody tr');
    await untilCount('the first page', rows, 25);
    expect(await rows.count()).toBe(25);
    // Infinite scroll: bringing the end of the table into view loads the next page, until there is none.
    await waitFor('every run, page by page', async () => {
      await page.locator('.sentinel').scrollIntoViewIfNeeded();
      return page.getByText('That is every run.').isVisible();
    }, 60_000, 200);
    expect(await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-run-id')))).toEqual(all);
    const kinds = new Set(await rows.locator('td:nth-child(2)').allTextContents());
    expect([...kinds].sort()).toEqual(['agent', 'eval']);

    // A run started elsewhere appears at the top, and its badge moves as its events arrive.
    const liveId = await startAgent(16, 'watched from the list');
    const liveBadge = page.locator(`tr[data-run-id="${liveId}"] .badge`);
    await page.locator(`tr[data-run-id="${liveId}"] .badge[data-status="running"]`).waitFor({ timeout: 30_000 });
    expect(await rows.first().getAttribute('data-run-id')).toBe(liveId);
    await page.locator(`tr[data-run-id="${liveId}"] .badge[data-status="done"]`).waitFor({ timeout: 90_000 });
    expect(await liveBadge.textContent()).toBe('done');
    await page.locator('h1').scrollIntoViewIfNeeded();
    await page.screenshot({ path: artifactPath('dashboard-runs-page.png'), fullPage: false });

    // Filters: kind, then a model on top of it, then status.
    const filters = page.getByRole('form', { name: 'Filter runs' });
    await filters.getByLabel('Kind', { exact: true }).selectOption('eval');
    await waitFor('only eval runs', async () => {
      const shown = await rows.locator('td:nth-child(2)').allTextContents();
      return shown.length > 0 && shown.every((k) => k === 'eval') && shown;
    });
    await filters.getByLabel('Model', { exact: true }).fill('m-seed-1');
    const seedOne = (await platform.http('GET', '/runs?kind=eval&model=m-seed-1&limit=200', { org })).body.runs.length;
    await waitFor('only m-seed-1 runs', async () => {
      const subjects = await rows.locator('td.subject').allTextContents();
      return subjects.length === seedOne && subjects.every((s) => s.startsWith('m-seed-1'));
    });
    await filters.getByLabel('Status', { exact: true }).selectOption('published');
    await waitFor('only published m-seed-1 runs', async () => {
      const statuses = await rows.locator('.badge').evaluateAll((badges) => badges.map((b) => b.getAttribute('data-status')));
      return statuses.length > 0 && statuses.length < seedOne && statuses.every((s) => s === 'published');
    });
  });
});
