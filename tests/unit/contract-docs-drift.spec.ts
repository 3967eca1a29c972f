import { Parser } from '@asyncapi/parser';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { TOPICS } from '@agentrun/contracts';
import { asyncApiDocument } from '../../libs/contracts/src/asyncapi';
import { renderContractsDoc } from '../../libs/contracts/src/docs';
import { REPO_ROOT } from '../support/stack-env';
// eslint-disable-next-line @typescript-eslint/no-require-imports -- the generator script's own module, plain CommonJS
const { renderContractFiles } = require('../../tools/contract-docs') as { renderContractFiles: (lib: object) => Record<string, string> };

const generated = renderContractFiles({ renderContractsDoc, asyncApiDocument });
const onDisk = (file: string) => readFileSync(join(REPO_ROOT, file), 'utf8');

describe('the documents generated from the contracts catalogue', () => {
  it.each(Object.keys(generated))('%s is what the generator writes (run `npm run docs:contracts` after changing a contract)', (file) => {
    expect(onDisk(file)).toBe(generated[file]);
  });

  it('the AsyncAPI document parses and validates as AsyncAPI 3 with no error or warning', async () => {
    const { document, diagnostics } = await new Parser().parse(onDisk('docs/asyncapi.yaml'));
    // Spectral severities: 0 error, 1 warning; information and hints (such as "a newer version exists") pass.
    expect(diagnostics.filter((d) => d.severity <= 1).map((d) => `${d.code}: ${d.message} at ${d.path.join('.')}`)).toEqual([]);
    expect(document?.version()).toBe('3.0.0');
  }, 60_000);

  it('covers every topic of the contracts, the run-state topic compacted and keyed by {org}/{run_id}', () => {
    const doc = parseYaml(onDisk('docs/asyncapi.yaml')) as {
      channels: Record<string, { address: string; bindings: { kafka: { topicConfiguration: { 'cleanup.policy': string[] } } } }>;
      components: { messages: Record<string, { bindings: { kafka: { key: { pattern?: string } } } }> };
    };
    const channels = Object.values(doc.channels);
    expect(channels.map((c) => c.address).sort()).toEqual(Object.values(TOPICS).sort());
    const runState = channels.find((c) => c.address === TOPICS.runState);
    expect(runState?.bindings.kafka.topicConfiguration['cleanup.policy']).toEqual(['compact']);
    expect(new RegExp(doc.components.messages.runStateRecord.bindings.kafka.key.pattern ?? '').test('acme/agent-42')).toBe(true);
    expect(new RegExp(doc.components.messages.runStateRecord.bindings.kafka.key.pattern ?? '').test('agent-42')).toBe(false);
  });
});
