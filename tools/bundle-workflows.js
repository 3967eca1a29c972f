// Bundles the workflow code once at build time, so a worker starts without running webpack.
const { bundleWorkflowCode } = require('@temporalio/worker');
const { writeFile } = require('node:fs/promises');
const path = require('node:path');

async function main() {
  const out = path.resolve(__dirname, '../libs/workflows/dist/workflow-bundle.js');
  const { code } = await bundleWorkflowCode({
    workflowsPath: require.resolve('@agentrun/workflows'),
    logger: { info() {}, debug() {}, trace() {}, warn: console.warn, error: console.error, log() {} },
  });
  await writeFile(out, code);
  console.log(`workflow bundle: ${path.relative(process.cwd(), out)} (${(code.length / 1024).toFixed(0)} KiB)`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
