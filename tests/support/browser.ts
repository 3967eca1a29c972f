import { execFile } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { REPO_ROOT } from './stack-env';

const run = promisify(execFile);

/** Debian's Chromium (deploy/local/ensure-chromium.sh installs it); playwright-core brings no browser. */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
}

/** A page of a fresh browser context (its own cookies and storage), at a laptop's size. */
export interface WatchedPage {
  context: BrowserContext;
  page: Page;
  /** Uncaught errors and console errors other than failed requests (a 404 the page expects is one). */
  problems: string[];
}

export async function openPage(browser: Browser, baseURL: string): Promise<WatchedPage> {
  const context = await browser.newContext({ baseURL, viewport: { width: 1366, height: 860 }, acceptDownloads: true });
  const page = await context.newPage();
  page.setDefaultTimeout(30_000);
  const problems: string[] = [];
  page.on('pageerror', (err) => problems.push(`uncaught: ${err.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error' && !/Failed to load resource/.test(message.text())) problems.push(`console: ${message.text()}`);
  });
  return { context, page, problems };
}

/**
 * The pages a suite's tests open, each in a fresh context. After each test, `closeAll()` closes them and
 * returns the problems they saw, so the suite can fail a test whose page threw or logged an error.
 */
export class OpenedPages {
  private readonly pages: WatchedPage[] = [];

  async open(browser: Browser, baseURL: string): Promise<WatchedPage> {
    const watched = await openPage(browser, baseURL);
    this.pages.push(watched);
    return watched;
  }

  async closeAll(): Promise<string[]> {
    const problems = this.pages.flatMap((o) => o.problems);
    for (const o of this.pages.splice(0)) await o.context.close();
    return problems;
  }
}

/** Signs in the way a person would: `/` redirects to the sign-in form, the token becomes the session cookie. */
export async function signIn(page: Page, token: string): Promise<void> {
  await page.goto('/');
  await page.getByLabel('API token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { level: 1, name: 'Runs' }).waitFor();
}

/** Where screenshots go: test-artifacts/ (git-ignored), kept after the run. */
export function artifactPath(name: string): string {
  const dir = join(REPO_ROOT, 'test-artifacts');
  mkdirSync(dir, { recursive: true });
  return join(dir, name);
}

/** A new API token for `org`, minted by the token CLI (tools/token.js) against the platform's database. */
export async function createToken(databaseUrl: string, org: string, subject?: string): Promise<string> {
  const args = ['create', '--org', org, '--label', 'browser-tests', ...(subject ? ['--subject', subject] : [])];
  const { stdout } = await run(process.execPath, [join(REPO_ROOT, 'tools/token.js'), ...args], {
    env: { PATH: process.env.PATH ?? '', DATABASE_URL: databaseUrl },
    cwd: REPO_ROOT,
  });
  const token = /^token: (\S+)$/m.exec(stdout)?.[1];
  if (!token) throw new Error(`tools/token.js printed no token: ${stdout}`);
  return token;
}
