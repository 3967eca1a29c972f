import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createToken } from '../support/browser';
import { Platform, uniqueId } from '../support/platform';
import { REPO_ROOT, stackUrls } from '../support/stack-env';
import { waitFor } from '../support/wait';

/**
 * schemathesis reads the gateway's own document and throws schema-valid and schema-invalid requests
 * at a real platform: whatever the document promises (statuses, bodies, content types, methods) the
 * gateway must keep, and whatever the document allows the gateway must accept.
 */

/** What the document cannot say itself: the cursor to use and the statuses a busy or stateful run may answer. */
const CONFIG = join(__dirname, 'openapi.schemathesis.toml');
const VENV = process.env.SCHEMATHESIS_VENV ?? join(REPO_ROOT, '.stack', 'opt', 'schemathesis-venv');
const ST = join(VENV, 'bin', 'st');
const CHECKS = [
  'positive_data_acceptance',
  'status_code_conformance',
  'unsupported_method',
  'not_a_server_error',
  'response_schema_conformance',
  'negative_data_rejection',
  'content_type_conformance',
];
/** Bounds that keep the whole test within a few minutes on a two-core machine. */
const MAX_EXAMPLES = 25;
const MAX_SECONDS = 120;
/** Fixed so a failure reproduces; SCHEMATHESIS_SEED explores other data. */
const SEED = process.env.SCHEMATHESIS_SEED ?? '20261201';
/** Where the full report is kept, beside the tiers' results. */
const REPORT_DIR = join(REPO_ROOT, 'test-artifacts');

interface Finished {
  code: number | null;
  output: string;
}

/** Runs `command` in `cwd` (where schemathesis leaves its caches), collecting its output. */
async function run(command: string, args: string[], cwd: string, env: Record<string, string>, timeoutMs: number): Promise<Finished> {
  const child = spawn(command, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1', ...env } });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const killer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  try {
    const code = await new Promise<number | null>((resolve, reject) => {
      child.once('error', reject);
      child.once('close', (exitCode) => resolve(exitCode));
    });
    return { code, output };
  } finally {
    clearTimeout(killer);
  }
}

describe('the OpenAPI document under schemathesis', () => {
  // Production mode, as a deployment runs: the fuzzer is a token-holding client of one org, and every
  // check production adds (tokens, the Host allow-list, the Origin rule) is in the path it explores.
  const platform = new Platform({ AGENTRUN_MODE: 'production' });
  beforeAll(() => platform.start());
  afterAll(() => platform.stop());

  it('finds no request the gateway answers otherwise than its document says', async () => {
    if (!existsSync(ST)) throw new Error(`${ST} is missing: run bash deploy/local/ensure-schemathesis.sh`);
    const org = uniqueId('fuzz');
    const auth = { Authorization: `Bearer ${await createToken(stackUrls().databaseUrl(platform.database), org)}` };
    // A list cursor is signed, so none the fuzzer makes up is valid: page through two real runs for
    // one, which the config file has every listing send.
    for (const runId of ['seed-1', 'seed-2']) {
      expect((await platform.http('POST', '/agents', { headers: auth, body: { run_id: runId, goal: 'give the fuzzer a page', max_steps: 1 } })).status).toBe(202);
    }
    const cursor = await waitFor('a second page of runs', async () => ((await platform.http('GET', '/runs?limit=1', { headers: auth })).body.next_cursor as string | null) ?? undefined, 60_000);
    const args = [
      '--config-file',
      CONFIG,
      'run',
      `${platform.gatewayUrl}/docs/openapi.json`,
      '--url',
      platform.gatewayUrl,
      '--checks',
      CHECKS.join(','),
      '--max-examples',
      String(MAX_EXAMPLES),
      // Not the coverage phase: on this Python it stops with an internal error, and it counts an
      // unknown extra header as a request the server should have refused.
      '--phases',
      'examples,fuzzing',
      '--max-time',
      String(MAX_SECONDS),
      '--seed',
      SEED,
      '--workers',
      '2',
      '--request-timeout',
      '20',
      '--header',
      `Authorization: ${auth.Authorization}`,
      '--generation-database',
      'none',
      '--no-color',
      '--output-truncate',
      'true',
    ];
    const started = Date.now();
    const result = await run(ST, args, platform.dataDir, { AGENTRUN_FUZZ_CURSOR: cursor }, (MAX_SECONDS + 60) * 1000);
    const seconds = Math.round((Date.now() - started) / 1000);
    // The full report goes to a file: its pytest-style closing rule ("== N warnings in Ns ==") would
    // otherwise sit in the test log and read as a test runner that ran nothing.
    mkdirSync(REPORT_DIR, { recursive: true });
    const report = join(REPORT_DIR, 'schemathesis.txt');
    writeFileSync(report, `schemathesis ${args.join(' ')}\n(${seconds} s, exit ${result.code})\n${result.output}`);
    const generated = /(\d+) generated, (\d+) passed/.exec(result.output);
    console.log(`schemathesis: exit ${result.code} in ${seconds} s; ${generated ? `${generated[1]} cases, ${generated[2]} passed` : 'no case count'}; report in ${report}`);
    if (result.code !== 0) throw new Error(`schemathesis failed (exit ${result.code}):\n${result.output}`);
  }, (MAX_SECONDS + 90) * 1000);
});
