// `npm run bench`: every benchmark, one after another, from one build (the npm script builds first).
// Each bench's command is the last `&&` step of its own `bench:<name>` script in package.json, so
// the two cannot drift apart. Every bench runs even if an earlier one failed; the exit code is
// non-zero if any failed.
//
//   npm run bench                      # all, in ORDER
//   npm run bench -- load temporal     # some, in the order given
const { spawnSync } = require('node:child_process');
const { readFileSync } = require('node:fs');
const path = require('node:path');

const ORDER = ['spine', 'agent', 'console', 'snapshot', 'projector', 'event-signing', 'kafka-send', 'budget', 'tokens', 'load', 'temporal', 'hosts', 'evals', 'secure', 'metrics', 'telemetry', 'model-real'];
const root = path.resolve(__dirname, '..');
const scripts = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')).scripts;

const wanted = process.argv.slice(2);
const names = wanted.length > 0 ? wanted : ORDER;
const commands = names.map((name) => {
  const script = scripts[`bench:${name}`];
  if (!script) throw new Error(`package.json has no script bench:${name}`);
  const last = script.split('&&').at(-1).trim();
  if (!last.startsWith('node ')) throw new Error(`bench:${name} does not end with a node command: ${script}`);
  return { name, argv: last.split(/\s+/) };
});

const results = [];
for (const { name, argv } of commands) {
  console.log(`\n===== bench:${name}: ${argv.join(' ')} (${new Date().toISOString()})`);
  const t0 = Date.now();
  const run = spawnSync(argv[0] === 'node' ? process.execPath : argv[0], argv.slice(1), { cwd: root, stdio: 'inherit' });
  const seconds = (Date.now() - t0) / 1000;
  const status = run.error ? `error: ${run.error.message}` : run.signal ? `killed by ${run.signal}` : run.status === 0 ? 'ok' : `exit ${run.status}`;
  results.push({ name, status, seconds });
  console.log(`===== bench:${name}: ${status} in ${seconds.toFixed(1)} s`);
}

console.log('\nbenchmarks:');
for (const r of results) console.log(`  ${r.name.padEnd(10)} ${r.status.padEnd(12)} ${r.seconds.toFixed(1).padStart(7)} s`);
const failed = results.filter((r) => r.status !== 'ok');
if (failed.length > 0) {
  console.log(`${failed.length} of ${results.length} failed: ${failed.map((r) => r.name).join(', ')}`);
  process.exit(1);
}
