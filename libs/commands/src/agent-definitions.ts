import { createHash } from 'node:crypto';
import type { NormalisedAgentDefinition } from '@agentrun/contracts';
import { canonicalJson } from '@agentrun/evals';

/**
 * A definition's version: the lowercase hex sha256 of its canonical JSON (keys sorted at every depth,
 * the form datasets are identified by) once normalised. The same definition, however its keys were
 * ordered or its tools written, has the same version; any change to it makes another.
 */
export function agentDefinitionVersion(definition: NormalisedAgentDefinition): string {
  return createHash('sha256').update(canonicalJson(definition), 'utf8').digest('hex');
}
