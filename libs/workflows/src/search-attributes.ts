import { SEARCH_ATTRIBUTES } from '@agentrun/contracts';

/** Temporal's typed keys for our attributes, as plain values (workflow code imports no SDK helpers). */
const upper = { Keyword: 'KEYWORD', Int: 'INT' } as const;
type Upper<K extends keyof typeof SEARCH_ATTRIBUTES> = (typeof upper)[(typeof SEARCH_ATTRIBUTES)[K] & keyof typeof upper];

function key<K extends keyof typeof SEARCH_ATTRIBUTES>(name: K): { name: K; type: Upper<K> } {
  return { name, type: upper[SEARCH_ATTRIBUTES[name] as keyof typeof upper] as Upper<K> };
}

export const AGENT_STATUS_KEY = key('AgentStatus');
export const CURRENT_STEP_KEY = key('CurrentStep');
export const OWNER_KEY = key('Owner');
export const ORG_KEY = key('Org');
export const RUN_KIND_KEY = key('RunKind');
export const RUN_PARENT_KEY = key('RunParent');
