/**
 * The real-model server (apps/model-server/src/real) as a child process on a free port, for its tests and
 * its benchmark. Needs `bash deploy/local/model-real.sh install` and a build of the model-server app
 * (`npm run test:model-real` and `npm run bench:model-real` do both first).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { REPO_ROOT } from './stack-env';
import { waitFor } from './wait';

export { REPO_ROOT };
export const REAL_MAIN = resolve(REPO_ROOT, 'apps/model-server/dist/real/main.js');
export const REAL_MODEL = 'smollm2-135m-instruct';

export interface RealModelProcess {
  /** e.g. `http://127.0.0.1:40123/v1`. */
  url: string;
  /** From spawn to /healthz answering 200. */
  startMs: number;
  /** The load time the server reports on /healthz. */
  loadMs: number;
  /** Everything the process printed so far. */
  output(): string;
  /** SIGTERM, then the exit code (SIGKILL after `timeoutMs`, which fails). */
  stop(timeoutMs?: number): Promise<number | null>;
}

export async function startRealModel(env: Record<string, string> = {}): Promise<RealModelProcess> {
  // Named here rather than left to the server's defaults, so they are checked before it starts.
  const paths = {
    MODEL_REAL_MODEL_PATH: process.env.MODEL_REAL_MODEL_PATH ?? resolve(REPO_ROOT, '.stack/opt/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf'),
    AGENTRUN_LLAMA_DIR: process.env.AGENTRUN_LLAMA_DIR ?? resolve(REPO_ROOT, '.stack/opt/llama/node_modules/node-llama-cpp'),
  };
  const missing = [REAL_MAIN, ...Object.values(paths)].filter((path) => !existsSync(path));
  if (missing.length > 0) {
    throw new Error(`missing ${missing.join(', ')}: run 'bash deploy/local/model-real.sh install' and 'npx tsc -b apps/model-server/tsconfig.json' first`);
  }
  const started = Date.now();
  const child: ChildProcess = spawn(process.execPath, [REAL_MAIN], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...paths, MODEL_REAL_PORT: '0', MODEL_REAL_HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolveExit) => child.once('exit', (code) => resolveExit(code)));
  let gone = false;
  void exited.then(() => (gone = true));

  try {
    const url = await waitFor('the real-model server to print its address', () => {
      if (gone) throw new Error(`it exited:\n${output}`);
      return /listening on (http:\/\/\S+\/v1)/.exec(output)?.[1];
    }, 30_000, 50);
    const health = await waitFor('the real-model server to load its model (/healthz 200)', async () => {
      if (gone) throw new Error(`it exited:\n${output}`);
      const res = await fetch(`${url.replace(/\/v1$/, '')}/healthz`);
      return res.status === 200 ? ((await res.json()) as { load_ms: number }) : undefined;
    }, 120_000, 100);
    return {
      url,
      startMs: Date.now() - started,
      loadMs: health.load_ms,
      output: () => output,
      async stop(timeoutMs = 30_000) {
        if (gone) return exited;
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
        const code = await exited;
        clearTimeout(timer);
        return code;
      },
    };
  } catch (err) {
    child.kill('SIGKILL');
    await exited;
    throw err;
  }
}

/** POST /chat/completions with a JSON body (or raw text); the status, headers and body text. */
export interface ChatResponse {
  status: number;
  headers: Headers;
  text: string;
  json<T = ChatCompletion>(): T;
}

/** The parts of a chat completion (or an error body) the tests read. */
export interface ChatCompletion {
  id: string;
  object: string;
  model: string;
  choices: { index: number; message: { role: string; content: string }; finish_reason: string }[];
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
  error?: { message: string; type: string; param: string | null; code: string | null };
}

export async function postChat(url: string, body: unknown): Promise<ChatResponse> {
  const res = await fetch(`${url}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: <T>() => JSON.parse(text) as T };
}
