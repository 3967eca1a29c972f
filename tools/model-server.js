// Runs the deterministic OpenAI-compatible model server (libs/activities/src/llm/model-server.ts) on its own,
// for offline runs: `npx tsc -b tsconfig.build.json && node tools/model-server.js`.
// MODEL_SERVER_PORT (default 8090) and MODEL_SERVER_HOST (default 127.0.0.1) choose where it listens.
const path = require('node:path');

const compiled = path.resolve(__dirname, '../libs/activities/dist/llm/model-server.js');
let startModelServer;
try {
  ({ startModelServer } = require(compiled));
} catch (err) {
  console.error(`model-server: cannot load ${path.relative(process.cwd(), compiled)}; build first with \`npx tsc -b tsconfig.build.json\` (${err.message})`);
  process.exit(1);
}

async function main() {
  const raw = process.env.MODEL_SERVER_PORT ?? '8090';
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`MODEL_SERVER_PORT must be a port number, got '${raw}'`);
  const host = process.env.MODEL_SERVER_HOST || '127.0.0.1';
  const server = await startModelServer({ port, host });
  console.log(`model-server: listening on ${server.url} (POST /chat/completions, GET /models, GET /healthz)`);

  let stopping = false;
  const stop = (signal) => {
    if (stopping) return;
    stopping = true;
    console.log(`model-server: ${signal}, closing after ${server.requests} chat requests`);
    server.close().then(
      () => process.exit(0),
      (err) => {
        console.error(err);
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((err) => {
  console.error(`model-server: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
