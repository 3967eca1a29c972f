// Turns the services' JSON log lines on stdin into lines a person reads on stdout; anything else
// (tail's `==> file <==` headers, a line some library printed itself) passes through unchanged.
//   tail -F .stack/logs/apps/*.log | node tools/pretty-logs.js
// `npm start` follows the apps' logs through it. Needs the built libs (`npm run build`).
const path = require('node:path');
const readline = require('node:readline');

let prettyLine;
try {
  ({ prettyLine } = require(path.resolve(__dirname, '../libs/telemetry/dist/logging.js')));
} catch {
  prettyLine = (line) => line;
}

const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on('line', (line) => process.stdout.write(`${prettyLine(line)}\n`));
// A closed terminal (Ctrl-C, `| head`) ends us quietly.
process.stdout.on('error', () => process.exit(0));
