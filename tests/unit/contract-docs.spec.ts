import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { renderContractsDoc } from '../../libs/contracts/src/docs';
import { REPO_ROOT } from '../support/stack-env';

describe('docs/CONTRACTS.md', () => {
  it('is what the schemas generate (run `npm run docs:contracts` after changing a contract)', () => {
    expect(readFileSync(join(REPO_ROOT, 'docs/CONTRACTS.md'), 'utf8')).toBe(renderContractsDoc());
  });
});
