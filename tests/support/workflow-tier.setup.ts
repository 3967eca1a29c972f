import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { BUNDLE_ENV, bundleWorkflowsFromSource, temporalCli, writeBundle } from './workflow-env';

/**
 * The workflow tier's global setup: the workflow code is bundled once per jest run (webpack takes
 * seconds), and every test file's workers load that file. Fails early when the CLI is missing.
 */
export default async function setup(): Promise<void> {
  temporalCli();
  process.env[BUNDLE_ENV] = writeBundle(await bundleWorkflowsFromSource());
}

export function teardown(): void {
  const path = process.env[BUNDLE_ENV];
  if (path) rmSync(dirname(path), { recursive: true, force: true });
}
