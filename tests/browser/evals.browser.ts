import { readFileSync } from 'node:fs';
import type { CaseResultRow } from '@agentrun/contracts';
import type { Browser, Page } from 'playwright-core';
import { artifactPath, createToken, launchChromium, OpenedPages, signIn } from '../support/browser';
import { Platform, uniqueId } from '../support/platform';
import { stackUrls } from '../support/stack-env';
import { waitFor } from '../support/wait';

const untilStatus = (page: Page, status: string, timeout = 120_000) => page.locator(`.run-header .badge[data-status="${status}"]`).waitFor({ timeout });
const caseIds = (page: Page): Promise<(string | null)[]> => page.locator('.cases-table tbody tr').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-case-id')));
/** Waits until the case table lists exactly `ids`, in this order. */
const untilCases = (page: Page, ids: string[]) =>
  waitFor(`the case table to list ${ids.join(', ') || 'nothing'}`, async () => JSON.stringify(await caseIds(page)) === JSON.stringify(ids), 60_000, 100);

/**
 * The eval dashboard in Chromium: the case table of a real eval (filters, the case drawer, the export),
 * the comparison with another eval of the same dataset, and datasets uploaded and evaluated from the page.
 * The local model server answers `[answer: X]` with exactly X, so every score here is known in advance.
 */
describe('the eval dashboard in Chromium', () => {
  const platform = new Platform();
  const org = uniqueId('evals-web');
  let browser: Browser;
  let token: string;
  const opened = new OpenedPages();

  beforeAll(async () => {
    [browser] = await Promise.all([launchChromium(), platform.start()]);
    token = await createToken(stackUrls().databaseUrl(platform.database), org);
  });
  afterAll(async () => {
    await browser?.close();
    await platform.stop();
  });
  afterEach(async () => {
    // Nothing the page did threw, and the CSP refused nothing (either would be a console error).
    expect(await opened.closeAll()).toEqual([]);
  });

  const signedIn = async (): Promise<Page> => {
    const { page } = await opened.open(browser, platform.gatewayUrl);
    await signIn(page, token);
    return page;
  };

  const startEval = async (body: Record<string, unknown>): Promise<string> => {
    const runId = uniqueId('eval');
    const res = await platform.http('POST', '/evals', { org, body: { run_id: runId, model: 'scripted', reviewers: ['alice'], ...body } });
    expect(res.status).toBe(202);
    return runId;
  };
  const results = async (runId: string): Promise<Record<string, CaseResultRow>> => {
    const res = await platform.http('GET', `/runs/${runId}/results`, { org });
    expect(res.status).toBe(200);
    return Object.fromEntries((res.body.cases as CaseResultRow[]).map((c) => [c.case_id, c]));
  };

  it('shows the cases of an eval, filters them, opens one, and compares the eval with another of the same dataset', async () => {
    const cases = [
      { id: 'a', input: '[answer: Paris]', target: 'Paris' },
      { id: 'b', input: '[answer: it is Rome]', target: 'Rome' },
    ];
    // The same cases inline twice are one dataset (by content hash): 'exact' fails b, 'includes' passes it.
    const [strict, lenient, synthetic] = await Promise.all([
      startEval({ dataset: { cases }, scorers: ['exact'] }),
      startEval({ dataset: { cases }, scorers: ['includes'] }),
      startEval({ suite: 'smoke', cases: 2, fail_fraction: 0 }),
    ]);
    await Promise.all([strict, lenient, synthetic].map((runId) => platform.waitForStatus(org, runId, 'awaiting_review')));
    const strictRows = await results(strict);
    expect([strictRows.a.score, strictRows.b.score]).toEqual([1, 0]);

    const page = await signedIn();
    await page.goto(`/ui/runs/${strict}`);
    await untilStatus(page, 'awaiting_review');
    await untilCases(page, ['a', 'b']);
    const firstRow = await page.locator('.cases-table tbody tr[data-case-id="a"] td').allTextContents();
    expect(firstRow.slice(0, 2)).toEqual(['ok', '1.0000']);
    expect(await page.getByTestId('eval-dataset').textContent()).toMatch(/^[0-9a-f]{12} · generate$/);

    // Filters: the scorer 'exact' gave less than 1 to b only; no case failed outright.
    const filters = page.getByRole('form', { name: 'Filter cases' });
    expect(await filters.getByLabel('Scorer').locator('option').allTextContents()).toEqual(['any', 'exact']);
    await filters.getByLabel('Scorer').selectOption('exact');
    await untilCases(page, ['b']);
    await filters.getByLabel('Outcome').selectOption('failed');
    await untilCases(page, []);
    await page.getByText('No finished case matches these filters.').waitFor();
    await filters.getByLabel('Outcome').selectOption('');
    await untilCases(page, ['b']);

    // The drawer: input, target, output and the scorer's explanation, as the API has them.
    await page.locator('.cases-table tbody tr[data-case-id="b"]').click();
    const drawer = page.getByRole('dialog', { name: 'Case b' });
    await drawer.waitFor();
    expect(await drawer.getByTestId('drawer-input').textContent()).toBe('[answer: it is Rome]');
    expect(await drawer.getByTestId('drawer-targets').textContent()).toBe('Rome');
    expect(await drawer.getByTestId('drawer-output').textContent()).toBe('it is Rome');
    expect(strictRows.b.result?.output).toBe('it is Rome');
    const explanation = strictRows.b.result!.scores[0].explanation;
    expect(explanation).toMatch(/none of/);
    expect(await drawer.locator('tr[data-scorer="exact"] td').allTextContents()).toEqual(['0.0000', explanation]);
    expect(await drawer.getByTestId('drawer-usage').textContent()).toMatch(/^\d+ in · \d+ out$/);
    await page.screenshot({ path: artifactPath('dashboard-eval-case-drawer.png'), fullPage: false });
    await page.keyboard.press('Escape');
    await drawer.waitFor({ state: 'hidden' });

    // The export carries the filter: b only, one JSON object per line.
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: 'Export JSONL' }).click()]);
    expect(download.suggestedFilename()).toBe(`${strict}-results.jsonl`);
    const lines = readFileSync(await download.path(), 'utf8')
      .trim().split('\n').map((l) => JSON.parse(l) as CaseResultRow);
    expect(lines.map((l) => l.case_id)).toEqual(['b']);

    // The lenient eval against the strict one: b improved, a unchanged, a mean difference of +0.5.
    await page.goto(`/ui/runs/${lenient}`);
    await untilCases(page, ['a', 'b']);
    const compare = page.getByRole('form', { name: 'Compare with another eval' });
    await waitFor('the strict eval offered as the baseline', async () => (await compare.getByLabel('Baseline eval').inputValue()) === strict);
    await compare.getByRole('button', { name: 'Compare' }).click();
    const comparison = page.getByTestId('comparison');
    await comparison.waitFor();
    const api = (await platform.http('GET', `/runs/${lenient}/compare?with=${strict}`, { org })).body;
    expect(api).toMatchObject({ mean_difference: 0.5, paired: 2 });
    expect(await comparison.locator('tr[data-case-id="b"]').getAttribute('data-change')).toBe('improved');
    expect(await comparison.locator('tr[data-case-id="a"]').getAttribute('data-change')).toBe('unchanged');
    expect(await comparison.locator('tr[data-case-id="b"] td').allTextContents()).toEqual(['improved', '0.0000', '1.0000', '+1.0000']);
    expect(await page.getByTestId('compare-counts').locator('li').evaluateAll((lis) => lis.map((li) => `${li.getAttribute('data-change')}=${li.getAttribute('data-count')}`))).toEqual([
      'improved=1',
      'regressed=0',
      'unchanged=1',
      'added=0',
      'removed=0',
    ]);
    const difference = await page.getByTestId('compare-difference').textContent();
    // Two paired cases are enough for the bootstrap interval: the differences 1 and 0 resampled give
    // means of 0, 0.5 and 1, a quarter of them 0 and a quarter 1, so the interval is 0 to 1. The API
    // gives it and the page shows it.
    expect(api.ci95).toEqual([0, 1]);
    expect(difference).toBe('+0.5000 (95% interval 0.0000 to +1.0000), over 2 cases graded in both');
    await page.screenshot({ path: artifactPath('dashboard-eval-compare.png'), fullPage: true });

    // A synthetic eval has no dataset: the gateway's 409 shows as it gave it.
    await compare.getByLabel('Baseline eval').fill(synthetic);
    await compare.getByRole('button', { name: 'Compare' }).click();
    const refused = page.getByTestId('outcome-compare').getByRole('alert');
    await refused.locator('.error').waitFor();
    expect(await refused.textContent()).toBe(`409 no dataset: run '${synthetic}' is a synthetic eval: only evals over a dataset compare`);

    // The synthetic eval's own page: its cases are listed, and a case has no texts to show.
    await page.goto(`/ui/runs/${synthetic}`);
    await waitFor('both synthetic cases in the table', async () => (await caseIds(page)).length === 2);
    await page.locator('.cases-table tbody tr').first().click();
    await page.getByTestId('drawer-synthetic').waitFor();
    expect(await page.getByRole('dialog').getByTestId('drawer-status').textContent()).toBe('ok');
    await page.getByRole('dialog').getByRole('button', { name: 'Close' }).click();
    await page.getByRole('dialog').waitFor({ state: 'hidden' });
    // Closed means closed: the next case opens a drawer of its own, from the keyboard too.
    const second = (await caseIds(page))[1]!;
    await page.getByRole('button', { name: `Open case ${second}` }).focus();
    await page.keyboard.press('Enter');
    await page.getByRole('dialog', { name: `Case ${second}` }).waitFor();
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'hidden' });
    expect(await page.getByText('A synthetic eval has no dataset').count()).toBe(1);
  });

  it('uploads a dataset from the page, refuses a bad one with the line, and evaluates the upload from the start form', async () => {
    const page = await signedIn();
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Datasets' }).click();
    await page.getByRole('heading', { level: 1, name: 'Datasets' }).waitFor();
    await page.locator('tr[data-suite="qa"]').waitFor();

    const form = page.getByRole('form', { name: 'Upload a dataset' });
    const lines = ['{"id":"a","input":"[answer: Paris]","target":"Paris"}', '{"id":"b","input":"[answer: it is Rome]","target":"Rome"}'];
    await form.getByLabel('JSONL file').setInputFiles({ name: 'capitals.jsonl', mimeType: 'application/x-ndjson', buffer: Buffer.from(`${lines.join('\n')}\n`) });
    // The name follows the file until one is typed.
    expect(await form.getByLabel('Dataset name').inputValue()).toBe('capitals');
    const name = uniqueId('capitals');
    await form.getByLabel('Dataset name').fill(name);
    await form.getByRole('button', { name: 'Upload' }).click();
    await page.getByTestId('outcome-upload').locator('.ok').waitFor();
    expect(await page.getByTestId('outcome-upload').textContent()).toMatch(new RegExp(`^Uploaded ${name}: 2 cases, `));
    const row = page.locator(`table.datasets tr[data-dataset-name="${name}"]`);
    await row.waitFor();
    const listed = (await platform.http('GET', '/datasets', { org })).body.datasets as { id: string; name: string }[];
    const stored = listed.find((d) => d.name === name);
    expect(await row.getAttribute('data-dataset-id')).toBe(stored?.id);

    // A line without a target: the 400 names the line.
    await form.getByLabel('JSONL file').setInputFiles({ name: 'broken.jsonl', mimeType: 'application/x-ndjson', buffer: Buffer.from(`${lines[0]}\n{"id":"c","input":"x"}\n`) });
    await form.getByLabel('Dataset name').fill('broken');
    await form.getByRole('button', { name: 'Upload' }).click();
    const alert = page.getByTestId('outcome-upload').getByRole('alert');
    await alert.locator('.error').waitFor();
    expect(await alert.textContent()).toMatch(/^400 invalid dataset: .*line 2/);
    expect(await page.locator('table.datasets tr[data-dataset-name="broken"]').count()).toBe(0);

    // The start form picks the upload, a solver and a scorer.
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Runs' }).click();
    await page.locator('summary', { hasText: 'Start a run' }).click();
    const start = page.getByRole('form', { name: 'Start a run' });
    await start.getByLabel('Eval run').check();
    await start.getByLabel('A dataset').check();
    const runId = uniqueId('eval-upload');
    await start.getByLabel('Run id').fill(runId);
    await start.getByLabel('Model', { exact: true }).fill('scripted');
    const option = start.getByLabel(/^Dataset/).locator(`option[value="id:${stored!.id}"]`);
    await option.waitFor({ state: 'attached' });
    await start.getByLabel(/^Dataset/).selectOption(`id:${stored!.id}`);
    await start.getByLabel('Solver').selectOption('generate');
    await start.getByLabel('Scorers').fill('includes');
    await start.getByLabel('Reviewers').fill('alice');
    await start.getByRole('button', { name: 'Start eval run' }).click();
    await page.waitForURL(`**/ui/runs/${runId}`);
    await untilStatus(page, 'awaiting_review');
    await untilCases(page, ['a', 'b']);
    const state = (await platform.http('GET', `/runs/${runId}`, { org })).body.state;
    expect(state).toMatchObject({ dataset_id: stored!.id, solver: 'generate', score: 1 });
    expect(Object.values(await results(runId)).map((c) => c.result?.scores.map((s) => s.scorer))).toEqual([['includes'], ['includes']]);
  });
});
