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
    // The contracts' workflow entry: every type, values only from the modules that build no schema. The
    // workflows are CommonJS, so webpack cannot drop what they do not use from the whole index, and every
    // new workflow execution would build every TypeBox schema again. `npm run lint` type-checks the
    // workflows against this entry (libs/workflows/tsconfig.bundle-check.json).
    webpackConfigHook: (config) => ({
      ...config,
      resolve: { ...config.resolve, alias: { ...config.resolve?.alias, '@agentrun/contracts$': path.resolve(__dirname, '../libs/contracts/src/workflow.ts') } },
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
