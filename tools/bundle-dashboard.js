// Builds the dashboard: type-checks the browser code (its own DOM tsconfig), then bundles it with
// esbuild into libs/dashboard/dist/public (index.html, app.js, app.css). Everything the page needs is
// in those files, so it works offline and the gateway serves it same-origin.
const { execFileSync } = require('node:child_process');
const { copyFile, mkdir, rm, stat } = require('node:fs/promises');
const path = require('node:path');
const esbuild = require('esbuild');

const ROOT = path.resolve(__dirname, '..');
const APP = path.join(ROOT, 'libs/dashboard/src/app');
const OUT = path.join(ROOT, 'libs/dashboard/dist/public');

async function main() {
  execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', path.join(APP, 'tsconfig.json')], { stdio: 'inherit' });
  await rm(OUT, { recursive: true, force: true });
  await mkdir(OUT, { recursive: true });
  await esbuild.build({
    entryPoints: { app: path.join(APP, 'main.tsx') },
    outdir: OUT,
    bundle: true,
    minify: true,
    format: 'iife',
    platform: 'browser',
    target: ['chrome110', 'firefox110', 'safari16'],
    jsx: 'automatic',
    jsxImportSource: 'preact',
    legalComments: 'none',
    // The contracts' ES module source, so the schemas the page never uses are left out of the bundle.
    alias: { '@agentrun/contracts': path.join(ROOT, 'libs/contracts/src/index.ts') },
    logLevel: 'warning',
  });
  await copyFile(path.join(APP, 'index.html'), path.join(OUT, 'index.html'));
  const sizes = [];
  for (const name of ['index.html', 'app.js', 'app.css']) sizes.push(`${name} ${((await stat(path.join(OUT, name))).size / 1024).toFixed(0)} KiB`);
  console.log(`dashboard: ${path.relative(process.cwd(), OUT)} (${sizes.join(', ')})`);
}

main().catch((err) => {
  console.error(err.message ?? err);
  process.exit(1);
});
