import { loadRealModelConfig } from './config';
import { loadLlamaModel } from './llama-model';
import { startRealModelServer } from './server';

/**
 * The real-model server as a process (`npm run model:real`, or the `model-real` app of
 * `MODEL_PROFILE=smollm npm start`). It listens at once and prints `listening on <url>`; /healthz turns
 * 200 when the model is loaded. A model that cannot be loaded ends the process with status 1.
 */
async function main(): Promise<void> {
  const config = loadRealModelConfig();
  const log = (line: string) => console.log(`model-real: ${line}`);
  const server = await startRealModelServer(
    () =>
      loadLlamaModel({
        llamaDir: config.AGENTRUN_LLAMA_DIR,
        modelPath: config.MODEL_REAL_MODEL_PATH,
        contextSize: config.MODEL_REAL_CONTEXT_SIZE,
        threads: config.MODEL_REAL_THREADS,
      }),
    {
      port: config.MODEL_REAL_PORT,
      host: config.MODEL_REAL_HOST,
      modelName: config.MODEL_REAL_NAME,
      defaultMaxTokens: config.MODEL_REAL_DEFAULT_MAX_TOKENS,
      maxWaiting: config.MODEL_REAL_QUEUE,
      drainMs: config.MODEL_REAL_DRAIN_MS,
      log,
    },
  );
  log(`listening on ${server.url} (POST /chat/completions, GET /models, GET /healthz); loading ${config.MODEL_REAL_MODEL_PATH}`);

  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log(`${signal}, closing after ${server.completions} completions`);
    server.close().then(
      () => process.exit(0),
      (err: unknown) => {
        console.error(err);
        process.exit(1);
      },
    );
  };
  // `on`, not `once`: node-llama-cpp's dependencies install signal-exit, which kills the process with the
  // signal again when it finds no other listener left for it, cutting the drain short.
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));

  const { loadMs } = await server.loaded;
  log(`model '${config.MODEL_REAL_NAME}' loaded in ${loadMs} ms (context ${config.MODEL_REAL_CONTEXT_SIZE} tokens, ${config.MODEL_REAL_THREADS} threads); ready`);
}

main().catch((err: unknown) => {
  console.error(`model-real: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
