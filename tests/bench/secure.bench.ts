/**
 * What the secure profile costs: publish -> first SSE event with every client on TLS (Kafka SASL_SSL with
 * SCRAM and ACLs, Temporal through the mTLS proxy, Postgres verify-full) beside the plain profile, in one
 * run on this machine, and the secure stack's cold and warm start. The phases go plain, secure, plain, so
 * a drift of the machine during the run shows as a difference between the two plain rows.
 *
 *   npm run bench:secure -- [runs=20]
 *
 * It restarts the local stack (down, up in each profile) and leaves it as it found it. A cold start is
 * the first with no secure state: .stack/secure (CA, certificates, passwords) and the secure broker's
 * data are removed first, so certificates, SCRAM users, ACLs and the broker's format are all made anew.
 */
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Platform } from '../support/platform';
import { runningStackProfile } from '../support/secure-stack';
import { REPO_ROOT } from '../support/stack-env';
import { measureSpine, percentile, row } from './command-to-sse.bench';

function stack(command: 'up' | 'down', profile?: 'plain' | 'secure'): number {
  console.error(`[bench] stack.sh ${command}${profile ? ` (${profile})` : ''}`);
  const t0 = performance.now();
  const result = spawnSync('bash', [join(REPO_ROOT, 'deploy/local/stack.sh'), command], {
    env: { ...process.env, ...(profile ? { AGENTRUN_STACK_PROFILE: profile } : {}) },
    stdio: ['ignore', 'pipe', 'pipe'],
    encoding: 'utf8',
  });
  if (result.status !== 0) throw new Error(`stack.sh ${command} ${profile ?? ''} failed:\n${result.stdout}\n${result.stderr}`);
  return (performance.now() - t0) / 1000;
}

async function spine(secure: boolean, runs: number): Promise<number[]> {
  console.error(`[bench] ${runs} runs on the ${secure ? 'secure' : 'plain'} profile`);
  const platform = new Platform({}, { secure });
  await platform.start();
  try {
    // One run first, so connection set-up and the first workflow bundle load are not in the figures.
    await measureSpine(platform, 1);
    return (await measureSpine(platform, runs)).toFirst;
  } finally {
    await platform.stop();
  }
}

async function main(): Promise<void> {
  const runs = Number(process.argv[2] ?? 20);
  const before = runningStackProfile();
  const starts: Record<string, number> = {};
  const firsts: Record<string, number[]> = {};
  try {
    stack('down');
    starts['plain, warm'] = stack('up', 'plain');
    firsts['plain (1)'] = await spine(false, runs);
    stack('down');
    rmSync(join(REPO_ROOT, '.stack', 'secure'), { recursive: true, force: true });
    rmSync(join(REPO_ROOT, '.stack', 'data', 'kafka-secure'), { recursive: true, force: true });
    starts['secure, cold (new CA, users, ACLs, broker format)'] = stack('up', 'secure');
    stack('down');
    starts['secure, warm'] = stack('up', 'secure');
    firsts['secure'] = await spine(true, runs);
    stack('down');
    stack('up', 'plain');
    firsts['plain (2)'] = await spine(false, runs);
  } finally {
    stack('down');
    if (before !== 'none') stack('up', before === 'secure' ? 'secure' : 'plain');
  }
  console.log(`\nstack start (stack.sh up, installs already cached)`);
  for (const [name, seconds] of Object.entries(starts)) console.log(`  ${name.padEnd(52)} ${seconds.toFixed(1).padStart(6)} s`);
  console.log(`\npublish -> first SSE event, ${runs} runs per profile, one at a time (agent.start with max_steps=2)`);
  for (const [name, values] of Object.entries(firsts)) console.log(`  ${row(name, values)}`);
  const plain = (percentile(firsts['plain (1)'], 50) + percentile(firsts['plain (2)'], 50)) / 2;
  console.log(`\nratio p50 secure / plain (mean of the two plain p50s): ${(percentile(firsts.secure, 50) / plain).toFixed(2)}x`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
