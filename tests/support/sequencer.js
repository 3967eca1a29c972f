// Jest's order of test files for the tiers that run files side by side: the longest first, so the last
// worker to finish is not one that started a two-minute file at the end. A file's length is what jest's
// own cache measured on this machine, else tests/support/test-durations.json (measured in CI and
// committed; `node tools/slowest-tests.js test-artifacts --durations` prints it afresh), else a minute.
const { readFileSync } = require('node:fs');
const { join, relative } = require('node:path');
const Sequencer = require('@jest/test-sequencer').default;

const ROOT = join(__dirname, '..', '..');
let committed = {};
try {
  committed = JSON.parse(readFileSync(join(__dirname, 'test-durations.json'), 'utf8'));
} catch {
  // no table: jest's cache or the default
}
const UNKNOWN_S = 60;

class LongestFirst extends Sequencer {
  sort(tests) {
    const seconds = (test) => {
      const cached = this._getCache(test)[test.path];
      if (cached && cached[1] > 0) return cached[1] / 1000;
      return committed[relative(ROOT, test.path)] ?? UNKNOWN_S;
    };
    return [...tests].sort((a, b) => seconds(b) - seconds(a));
  }
}

module.exports = LongestFirst;
