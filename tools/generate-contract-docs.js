// Writes docs/CONTRACTS.md and docs/asyncapi.yaml from the contracts lib's catalogue (run after the build).
const { writeFileSync } = require('node:fs');
const path = require('node:path');
const { renderContractsDoc } = require('../libs/contracts/dist/docs');
const { asyncApiDocument } = require('../libs/contracts/dist/asyncapi');
const { renderContractFiles } = require('./contract-docs');

for (const [file, text] of Object.entries(renderContractFiles({ renderContractsDoc, asyncApiDocument }))) {
  const out = path.resolve(__dirname, '..', file);
  writeFileSync(out, text);
  console.log(`wrote ${path.relative(process.cwd(), out)}`);
}
