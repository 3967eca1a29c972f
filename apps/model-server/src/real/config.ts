import { resolve } from 'node:path';
import { int, loadConfig, str, type ConfigOf, type Env } from '@agentrun/config';

/** The repository root: this file is apps/model-server/{src,dist}/real/config.*. */
const REPO_ROOT = resolve(__dirname, '../../../..');

/** The real-model server: where to listen, what to load, and how much to let wait. */
export const realModelSpec = {
  /** 0 picks a free port (the server prints the one it got). */
  MODEL_REAL_PORT: int(8091, 0, 65535),
  MODEL_REAL_HOST: str('127.0.0.1'),
  /** The name requests must give as `model`. */
  MODEL_REAL_NAME: str('smollm2-135m-instruct'),
  MODEL_REAL_MODEL_PATH: str(resolve(REPO_ROOT, '.stack/opt/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf')),
  /** The node-llama-cpp package directory (fetched by deploy/local/model-real.sh install). */
  AGENTRUN_LLAMA_DIR: str(resolve(REPO_ROOT, '.stack/opt/llama/node_modules/node-llama-cpp')),
  /** Prompt and answer together; SmolLM2 was trained on 8192. */
  MODEL_REAL_CONTEXT_SIZE: int(8192, 256, 8192),
  /**
   * CPU threads for llama.cpp. One: its threads meet at a spinning barrier every step, so two threads on
   * two cores shared with the platform's other processes ran 10 times slower here (4 tok/s, against 35
   * with one) whenever anything else was busy.
   */
  MODEL_REAL_THREADS: int(1, 1, 64),
  /** `max_tokens` when a request gives none. */
  MODEL_REAL_DEFAULT_MAX_TOKENS: int(128, 1, 8192),
  /** Requests that may wait behind the one being answered; more get 503 with Retry-After. */
  MODEL_REAL_QUEUE: int(16, 0, 1024),
  /** On SIGTERM, how long the answer in progress may take to finish before it is cut short. */
  MODEL_REAL_DRAIN_MS: int(10_000, 0, 600_000),
};
export type RealModelConfig = ConfigOf<typeof realModelSpec>;
export const loadRealModelConfig = (env?: Env) => loadConfig(realModelSpec, env);
