import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createToken } from '../support/browser';
import { Platform, uniqueId } from '../support/platform';
import { REPO_ROOT, stackUrls } from '../support/stack-env';
import { waitFor } from '../support/wait';

/**
 * schemathesis reads the gateway's own document and throws schema-valid and schema-invalid requests
 * at a real platform: whatever the document promises (statuses, bodies, content types, methods) the
 * gateway must keep, and whatever the document allows the gateway must accept. The run is bounded by
 * examples, not time, and judged by schemathesis' own reports: every operation exercised, at least
 * MIN_CASES cases, each phase's share, the document's links followed, no failure.
 */

/** The checks, and what the document cannot say itself: the cursor to use, the statuses a busy or stateful run may answer. */
const CONFIG = join(__dirname, 'openapi.schemathesis.toml');
const VENV = process.env.SCHEMATHESIS_VENV ?? join(REPO_ROOT, '.stack', 'opt', 'schemathesis-venv');
const ST = join(VENV, 'bin', 'st');
/**
 * examples: the document's own examples (none today; run when there are). coverage: every boundary and
 * every violation of each schema, once (its count follows from the document, not from MAX_EXAMPLES).
 * fuzzing: at most MAX_EXAMPLES random cases per operation. stateful: scenarios along the
 * document's links (their count is the config file's `phases.stateful` max-examples).
 */
const PHASES = ['examples', 'coverage', 'fuzzing', 'stateful'] as const;
/** Cases per operation in the fuzzing phase: with the coverage phase's systematic cases, the file stays near a minute. */
const MAX_EXAMPLES = 5;
/**
 * What a complete run generates at least, by phase. Seed 20261201 gave 1,400 to 1,850 coverage cases
 * (some follow the answers), 163 fuzzing and about 80 stateful: the floors sit well below, so other
 * seeds and a busy machine pass, and far above a run that skipped a phase or most of one.
 */
const MIN_CASES = { coverage: 1_000, fuzzing: 120, stateful: 30 } as const;
const MIN_TOTAL = 1_200;
/** Fixed so a failure reproduces; SCHEMATHESIS_SEED explores other data. */
const SEED = process.env.SCHEMATHESIS_SEED ?? '20261201';
/** A guard against a hung process only: the run is bounded by examples (about 35 s here), not by time. */
const HANG_GUARD_MS = 300_000;
/** Where the reports are kept, beside the tiers' results. */
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

/** `METHOD /path` of every operation the document describes. */
function documentedOperations(document: { paths: Record<string, Record<string, unknown>> }): string[] {
  const methods = ['get', 'put', 'post', 'delete', 'patch', 'options', 'head', 'trace'];
  return Object.entries(document.paths)
    .flatMap(([path, item]) => Object.keys(item).filter((key) => methods.includes(key)).map((method) => `${method.toUpperCase()} ${path}`))
    .sort();
}

/** What the NDJSON event stream says about the run: cases per phase and operation, the links followed, each phase's end. */
interface RunDigest {
  /** phase -> operation label -> cases generated. */
  cases: Record<string, Record<string, number>>;
  /** phase -> status (`success`, `failure`, `errored`, `skip`, ...). */
  phases: Record<string, string>;
  /** The document's own links that a stateful case followed with the value its parent's response gave: `POST /agents -> [202] GetRun -> GET /runs/{id}`. */
  linksFollowed: Set<string>;
}

function digestNdjson(text: string): RunDigest {
  const digest: RunDigest = { cases: {}, phases: {}, linksFollowed: new Set() };
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    const event = JSON.parse(line) as Record<string, Record<string, unknown>>;
    const finished = event.ScenarioFinished as { phase: string; recorder: { label: string; cases?: Record<string, { value: { method: string; path: string }; transition?: { id: string; is_inferred: boolean }; is_transition_applied?: boolean }> } } | undefined;
    if (finished) {
      const perOperation = (digest.cases[finished.phase] ??= {});
      for (const { value, transition, is_transition_applied } of Object.values(finished.recorder.cases ?? {})) {
        // A stateful scenario's cases are of several operations; any other scenario's are of its own
        // operation (some with another method: the unsupported_method probes).
        const label = finished.phase === 'stateful' ? `${value.method} ${value.path}` : finished.recorder.label;
        perOperation[label] = (perOperation[label] ?? 0) + 1;
        if (transition && !transition.is_inferred && is_transition_applied) digest.linksFollowed.add(transition.id);
      }
    }
    const phase = event.PhaseFinished as { phase: { name: string }; status: string } | undefined;
    if (phase) digest.phases[phase.phase.name] = phase.status;
  }
  return digest;
}

const total = (counts: Record<string, number> = {}): number => Object.values(counts).reduce((sum, n) => sum + n, 0);

describe('the OpenAPI document under schemathesis', () => {
  // Production mode, as a deployment runs: the fuzzer is a token-holding client of one org, and every
  // check production adds (tokens, the Host allow-list, the Origin rule) is in the path it explores.
  const platform = new Platform({ AGENTRUN_MODE: 'production' });
  beforeAll(() => platform.start());
  afterAll(() => platform.stop());

  it('finds no request the gateway answers otherwise than its document says, over every operation and link', async () => {
    if (!existsSync(ST)) throw new Error(`${ST} is missing: run bash deploy/local/ensure-schemathesis.sh`);
    const org = uniqueId('fuzz');
    const auth = { Authorization: `Bearer ${await createToken(stackUrls().databaseUrl(platform.database), org)}` };
    // A list cursor is signed, so none the fuzzer makes up is valid: page through two real runs for
    // one, which the config file has every listing send.
    for (const runId of ['seed-1', 'seed-2']) {
      expect((await platform.http('POST', '/agents', { headers: auth, body: { run_id: runId, goal: 'give the fuzzer a page', max_steps: 1 } })).status).toBe(202);
    }
    const cursor = await waitFor('a second page of runs', async () => ((await platform.http('GET', '/runs?limit=1', { headers: auth })).body.next_cursor as string | null) ?? undefined, 60_000);
    const document = (await platform.http('GET', '/docs/openapi.json')).body as { paths: Record<string, Record<string, unknown>> };
    const operations = documentedOperations(document);

    mkdirSync(REPORT_DIR, { recursive: true });
    const reports = { json: join(REPORT_DIR, 'schemathesis.json'), ndjson: join(REPORT_DIR, 'schemathesis.ndjson') };
    for (const file of Object.values(reports)) rmSync(file, { force: true });
    const args = [
      '--config-file',
      CONFIG,
      'run',
      `${platform.gatewayUrl}/docs/openapi.json`,
      '--url',
      platform.gatewayUrl,
      '--phases',
      PHASES.join(','),
      '--max-examples',
      String(MAX_EXAMPLES),
      '--seed',
      SEED,
      // The requests wait on Postgres, Kafka and Temporal more than on the CPU. Four workers need a
      // Python without CPython 3.11's ast.parse race (ensure-schemathesis.sh picks one).
      '--workers',
      '4',
      '--request-timeout',
      '20',
      '--header',
      `Authorization: ${auth.Authorization}`,
      '--generation-database',
      'none',
      '--no-color',
      '--output-truncate',
      'true',
      '--report',
      'json,ndjson',
      '--report-json-path',
      reports.json,
      '--report-ndjson-path',
      reports.ndjson,
    ];
    const started = Date.now();
    const result = await run(ST, args, platform.dataDir, { AGENTRUN_FUZZ_CURSOR: cursor }, HANG_GUARD_MS);
    const seconds = Math.round((Date.now() - started) / 1000);
    // The text report goes to a file: its pytest-style closing rule ("== N warnings in Ns ==") would
    // otherwise sit in the test log and read as a test runner that ran nothing.
    const text = join(REPORT_DIR, 'schemathesis.txt');
    writeFileSync(text, `schemathesis ${args.join(' ')}\n(${seconds} s, exit ${result.code})\n${result.output}`);
    if (!existsSync(reports.json) || !existsSync(reports.ndjson)) throw new Error(`schemathesis left no report (exit ${result.code}, ${seconds} s):\n${result.output}`);

    const summary = JSON.parse(readFileSync(reports.json, 'utf8')) as {
      operations: { total: number; selected: number };
      test_cases: { generated: number };
      failures: { code: string; title: string; count: number; operations: string[] }[];
      errors: unknown[];
    };
    const digest = digestNdjson(readFileSync(reports.ndjson, 'utf8'));
    const byPhase = Object.fromEntries(PHASES.map((phase) => [phase, total(digest.cases[phase])]));
    console.log(
      `schemathesis: exit ${result.code} in ${seconds} s; ${summary.test_cases.generated} cases (${PHASES.map((p) => `${p} ${byPhase[p]}`).join(', ')}); ` +
        `${summary.failures.length} failures; links followed: ${[...digest.linksFollowed].sort().join('; ') || 'none'}; reports in ${REPORT_DIR}/schemathesis.{txt,json,ndjson}`,
    );

    // Everything that is wrong with the run, together: a run that generated nothing shows every floor it missed.
    const problems: string[] = [];
    // No failure and no error, each named with its operations (the text report has the reproductions).
    if (result.code !== 0) problems.push(`schemathesis exited ${result.code}`);
    for (const f of summary.failures) problems.push(`failure ${f.code} ${f.title} (${f.count}) in ${f.operations.join(', ')}`);
    if (summary.errors.length > 0) problems.push(`${summary.errors.length} errors: ${JSON.stringify(summary.errors).slice(0, 2_000)}`);
    // Every operation of the document was loaded and sent cases, in the coverage and fuzzing phases alike.
    if (summary.operations.total !== operations.length || summary.operations.selected !== operations.length) {
      problems.push(`schemathesis selected ${summary.operations.selected} of ${summary.operations.total} operations; the document has ${operations.length}`);
    }
    for (const phase of ['coverage', 'fuzzing'] as const) {
      const missing = operations.filter((operation) => !((digest.cases[phase] ?? {})[operation] > 0));
      if (missing.length > 0) problems.push(`${phase}: no case for ${missing.length} operations: ${missing.join(', ')}`);
    }
    // Each phase ran and generated its share; the report's total is the cases counted here.
    for (const phase of ['coverage', 'fuzzing', 'stateful'] as const) {
      if (digest.phases[phase] !== 'success') problems.push(`${phase} phase ended ${digest.phases[phase] ?? 'never'}, not success`);
      const cases = total(digest.cases[phase]);
      if (cases < MIN_CASES[phase]) problems.push(`${phase}: ${cases} cases, fewer than ${MIN_CASES[phase]}`);
    }
    if (total(byPhase) !== summary.test_cases.generated) problems.push(`the NDJSON counts ${total(byPhase)} cases, the report ${summary.test_cases.generated}`);
    if (summary.test_cases.generated < MIN_TOTAL) problems.push(`${summary.test_cases.generated} cases in all, fewer than ${MIN_TOTAL}`);
    // The stateful phase followed the document's own links, from a started run to its reads. Which start
    // gets a 202 varies (a generated run id is often one the earlier phases took: a 409).
    const starts = ['POST /agents', 'POST /runs/{id}/fork', 'POST /evals'];
    if (![...digest.linksFollowed].some((link) => starts.some((start) => link.startsWith(`${start} -> [202] `)))) {
      problems.push(`the stateful phase followed no link from a started run (${starts.join(', ')})`);
    }
    // The output with each line cut at 500 characters: a reproduction can carry a 64 KiB body.
    const output = result.output
      .split('\n')
      .map((line) => (line.length > 500 ? `${line.slice(0, 500)}...` : line))
      .join('\n');
    if (problems.length > 0) throw new Error(`the schemathesis run is not good enough:\n- ${problems.join('\n- ')}\n\n${output}`);
  }, HANG_GUARD_MS + 120_000);
});
