#!/usr/bin/env node
// The slowest test files of a `tests/run.sh` run: reads every jest result (--json) in a directory and
// prints the N longest files with their tier, time and test count.
//
//   node tools/slowest-tests.js test-artifacts [N=10]
//   node tools/slowest-tests.js test-artifacts --durations   the e2e, browser and faults files' seconds as JSON, for
//       tests/support/test-durations.json (the order tests/support/sequencer.js starts files in)
const { readdirSync, readFileSync } = require('node:fs');
const { join, relative } = require('node:path');

const dir = process.argv[2] ?? 'test-artifacts';
const durations = process.argv[3] === '--durations';
const n = durations ? Infinity : Number(process.argv[3] ?? 10);
const files = [];
for (const name of readdirSync(dir).filter((f) => f.endsWith('.json'))) {
  let results;
  try {
    results = JSON.parse(readFileSync(join(dir, name), 'utf8'));
  } catch {
    continue; // not a jest result
  }
  if (!Array.isArray(results.testResults)) continue;
  for (const t of results.testResults) {
    files.push({ tier: name.replace(/\.json$/, ''), file: relative(process.cwd(), t.name), seconds: (t.endTime - t.startTime) / 1000, tests: t.assertionResults.length, status: t.status });
  }
}
files.sort((a, b) => b.seconds - a.seconds);
if (durations) {
  const table = Object.fromEntries(files.filter((f) => /^tests\/(e2e|browser|faults)\//.test(f.file)).map((f) => [f.file, Math.round(f.seconds)]).sort(([a], [b]) => a.localeCompare(b)));
  console.log(JSON.stringify(table, null, 2));
  process.exit(0);
}
for (const f of files.slice(0, n)) {
  console.log(`${f.seconds.toFixed(0).padStart(5)}s  ${f.tier.padEnd(10)} ${f.file} (${f.tests} tests${f.status === 'passed' ? '' : `, ${f.status}`})`);
}
if (files.length === 0) console.log('(no jest results)');
