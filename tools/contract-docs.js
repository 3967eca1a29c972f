// The documents generated from the contracts catalogue, by repository path. Shared by
// `npm run docs:contracts` (which writes them) and the unit test that fails when they drift.
const YAML = require('yaml');

/** `contracts` is the lib's docs and asyncapi modules: the built ones for the script, the sources for the test. */
function renderContractFiles({ renderContractsDoc, asyncApiDocument }) {
  return {
    'docs/CONTRACTS.md': renderContractsDoc(),
    'docs/asyncapi.yaml':
      '# Generated from libs/contracts by `npm run docs:contracts`; do not edit by hand.\n' +
      YAML.stringify(asyncApiDocument(), { lineWidth: 0, aliasDuplicateObjects: false }),
  };
}

module.exports = { renderContractFiles };
