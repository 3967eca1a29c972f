// Bundles the workflow code once at build time, so a worker starts without running webpack.
const { bundleWorkflowCode } = require('@temporalio/worker');
const { writeFile } = require('node:fs/promises');
const path = require('node:path');

async function main() {
  const out = path.resolve(__dirname, '../libs/workflows/dist/workflow-bundle.js');
  const { code } = await bundleWorkflowCode({
    workflowsPath: require.resolve('@agentrun/workflows'),
    // The Temporal SDK's OpenTelemetry workflow interceptors, for executions started in a trace: a worker
    // given a bundle cannot add interceptor modules, so they are bundled here (libs/runtime's
    // WORKFLOW_TRACING_MODULE, built before this runs). The workflows themselves never import the package.
    workflowInterceptorModules: [require.resolve('@agentrun/runtime/dist/workflow-tracing.interceptors')],
    logger: { info() {}, debug() {}, trace() {}, warn: console.warn, error: console.error, log() {} },
    // The contracts' ES module source, so the schemas workflow code never uses stay out of the bundle.
    webpackConfigHook: (config) => ({
      ...config,
      resolve: { ...config.resolve, alias: { ...config.resolve?.alias, '@agentrun/contracts$': path.resolve(__dirname, '../libs/contracts/src/index.ts') } },
      optimization: { ...config.optimization, sideEffects: true, usedExports: true },
    }),
  });
  await writeFile(out, code);
  console.log(`workflow bundle: ${path.relative(process.cwd(), out)} (${(code.length / 1024).toFixed(0)} KiB)`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
