// Writes docs/CONTRACTS.md from the contracts lib's schemas (run after the build).
const { writeFileSync } = require('node:fs');
const path = require('node:path');
const { renderContractsDoc } = require('../libs/contracts/dist/docs');

const out = path.resolve(__dirname, '../docs/CONTRACTS.md');
writeFileSync(out, renderContractsDoc());
console.log(`wrote ${path.relative(process.cwd(), out)}`);
