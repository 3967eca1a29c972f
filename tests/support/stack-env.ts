import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** The repository root, whether this file runs from source (jest) or from dist/tests (benchmarks). */
function findRepoRoot(from: string): string {
  for (let dir = from; dir !== dirname(dir); dir = dirname(dir)) {
    if (existsSync(join(dir, 'deploy', 'local', 'stack.env'))) return dir;
  }
  throw new Error(`no deploy/local/stack.env above ${from}`);
}

export const REPO_ROOT = findRepoRoot(__dirname);

/** The defaults of deploy/local/stack.env (`KEY=${KEY:-default}`), overridden by the environment. */
export function stackEnv(): Record<string, string> {
  const out: Record<string, string> = {};
  const text = readFileSync(join(REPO_ROOT, 'deploy/local/stack.env'), 'utf8');
  for (const line of text.split('\n')) {
    const m = /^([A-Z0-9_]+)=\$\{[A-Z0-9_]+:-"?(.*?)"?\}\s*$/.exec(line.trim());
    if (m) out[m[1]] = process.env[m[1]] ?? m[2];
  }
  return out;
}

export function stackUrls() {
  const env = stackEnv();
  return {
    kafkaBrokers: [`127.0.0.1:${env.KAFKA_PORT}`],
    temporalAddress: `127.0.0.1:${env.TEMPORAL_PORT}`,
    namespace: env.TEMPORAL_NAMESPACE,
    databaseUrl: (db = env.POSTGRES_DB) => `postgres://${env.POSTGRES_USER}:${env.POSTGRES_PASSWORD}@127.0.0.1:${env.POSTGRES_PORT}/${db}`,
  };
}
