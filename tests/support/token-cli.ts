import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT } from './stack-env';

const run = promisify(execFile);

type CliResult = { code: number; stdout: string; stderr: string };

/** Runs tools/token.js against a database; resolves with its exit code and output, never rejects on a non-zero exit. */
export async function tokenCli(databaseUrl: string, ...args: string[]): Promise<CliResult> {
  return tokenCliWith({}, databaseUrl, ...args);
}

/** The same, with settings of its own (AGENTRUN_COMMAND_KEY_SECRET for `command-key create`). */
export async function tokenCliWith(env: Record<string, string>, databaseUrl: string, ...args: string[]): Promise<CliResult> {
  try {
    const { stdout, stderr } = await run(process.execPath, [join(REPO_ROOT, 'tools/token.js'), ...args], {
      env: { PATH: process.env.PATH ?? '', ...env, DATABASE_URL: databaseUrl },
      cwd: REPO_ROOT,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

/** Runs tools/budget.js (`npm run budget`) against a database, as `tokenCli` does tools/token.js. */
export async function budgetCli(databaseUrl: string, ...args: string[]): Promise<CliResult> {
  try {
    const { stdout, stderr } = await run(process.execPath, [join(REPO_ROOT, 'tools/budget.js'), ...args], { env: { PATH: process.env.PATH ?? '', DATABASE_URL: databaseUrl }, cwd: REPO_ROOT });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}
