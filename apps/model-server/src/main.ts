import { loadModelServerConfig } from './config';
import { startModelServer } from './model-server';

/**
 * The deterministic OpenAI-compatible model server as a process, for offline runs (`npm start` runs it
 * unless MODEL_BASE_URL points at a real server). Plain Node: it has no Nest module to wire.
 */
async function main(): Promise<void> {
  const config = loadModelServerConfig();
  const server = await startModelServer({ port: config.MODEL_SERVER_PORT, host: config.MODEL_SERVER_HOST });
  console.log(`model-server: listening on ${server.url} (POST /chat/completions, GET /models, GET /healthz)`);

  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    console.log(`model-server: ${signal}, closing after ${server.requests} chat requests`);
    server.close().then(
      () => process.exit(0),
      (err: unknown) => {
        console.error(err);
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}

main().catch((err: unknown) => {
  console.error(`model-server: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
