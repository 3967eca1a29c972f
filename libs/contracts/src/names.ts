/** Topic, lane and attribute names: spelled once here, imported by every app, worker and test. */

export const TOPICS = {
  commands: 'agentrun.commands.v1',
  commandResults: 'agentrun.command-results.v1',
  commandsDlq: 'agentrun.commands.dlq.v1',
  runEvents: 'agentrun.run-events.v1',
  runEventsDlq: 'agentrun.run-events.dlq.v1',
  runState: 'agentrun.run-state.v1',
  runTokens: 'agentrun.run-tokens.v1',
} as const;
export type TopicName = (typeof TOPICS)[keyof typeof TOPICS];

/**
 * The headers that authenticate a run event: the id of the key it was signed with, and the hex
 * HMAC-SHA256 of the record's value bytes under that key. The projector dead-letters a record without
 * a valid pair.
 */
export const RUN_EVENT_SIGNATURE_HEADERS = {
  keyId: 'agentrun-key-id',
  signature: 'agentrun-signature',
} as const;

/** Temporal task queues, one per lane. */
export const TASK_QUEUES = {
  agentWorkflows: 'agent-workflows',
  cpuTools: 'cpu-tools',
  gpuTools: 'gpu-tools',
  gpuEval: 'gpu-eval',
  snapshots: 'snapshots',
} as const;
export type TaskQueueName = (typeof TASK_QUEUES)[keyof typeof TASK_QUEUES];

export type SearchAttributeType = 'Keyword' | 'Int' | 'Text' | 'Double' | 'Bool' | 'Datetime' | 'KeywordList';

/** Custom search attributes; the local stack registers each on every start. */
export const SEARCH_ATTRIBUTES = {
  AgentStatus: 'Keyword',
  CurrentStep: 'Int',
  Owner: 'Keyword',
  Org: 'Keyword',
  RunKind: 'Keyword',
  // `ParentRunId` is a Temporal system attribute (reserved), so ours has its own name.
  RunParent: 'Keyword',
} as const satisfies Record<string, SearchAttributeType>;

/** `run_id` as DESIGN defines it: chosen by the client or generated, unique within an org. */
export const RUN_ID_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$';
/**
 * Orgs never contain `/`, so `{org}/{run_id}` splits back unambiguously. Capitals are accepted on
 * the way in, but an org is one org whatever its case: see normaliseOrg.
 */
export const ORG_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$';

/**
 * The one spelling of an org: ASCII letters lowercased, nothing else changed. Every boundary where an
 * org comes in (the X-Org header, a token's org, a command on Kafka or HTTP, the token CLI) applies it,
 * so every later layer (workspace directories, object-store keys, database rows, workflow ids) sees
 * `acme` for `Acme` and `ACME`. Otherwise two orgs differing only in case would be two orgs to the
 * database but share their directories on a case-insensitive filesystem.
 *
 * Only A-Z are lowered, never by the locale or Unicode rules: `toLowerCase()` would turn the Kelvin
 * sign (U+212A) into an ASCII `k`, making an org that failed ORG_PATTERN pass it afterwards.
 */
export function normaliseOrg(org: string): string {
  return org.replace(/[A-Z]+/g, (upper) => upper.toLowerCase());
}
/** Snapshot ids are chosen by the run's workflow (`snap-0001`, ...): one per capture, unique within the run. */
export const SNAPSHOT_ID_PATTERN = RUN_ID_PATTERN;
export const COMMAND_ID_PATTERN = '^[\\x21-\\x7e]{1,128}$';

/**
 * A command's org credential on Kafka (production mode): the id of a command key its org was issued
 * (`npm run token -- command-key create --org ORG`), and the lowercase hex HMAC-SHA256 of the record's
 * exact value bytes under that key. The same header names as signed run events, on another topic.
 */
export const COMMAND_KEY_ID_HEADER = 'agentrun-key-id';
export const COMMAND_SIGNATURE_HEADER = 'agentrun-signature';

/**
 * A run's goal, in code points (an emoji is one): what `agent.start`, `agent.change_goal` and a fork's
 * new goal accept. 500 in version 1, widened to 8,000 so a goal can carry a scripted trajectory
 * (`[call: ...]` directives) or a task with its context.
 */
export const MAX_GOAL_CHARS = 8_000;

/** A command value larger than this is not read; it goes to the DLQ. An HTTP body has the same limit (413). */
export const MAX_COMMAND_BYTES = 64 * 1024;

/**
 * Objects and arrays nested deeper than this are refused in commands and run events: a value
 * thousands of levels deep overflows the stack of JSON.stringify and of Postgres' jsonb parser.
 */
export const MAX_JSON_DEPTH = 64;

export function workflowIdFor(org: string, runId: string): string {
  return `${org}/${runId}`;
}

export function parseWorkflowId(workflowId: string): { org: string; runId: string } | undefined {
  const slash = workflowId.indexOf('/');
  if (slash <= 0) return undefined;
  const rest = workflowId.slice(slash + 1);
  if (rest.includes('/')) return undefined; // children such as `{org}/{run}/research/3` are not runs
  return { org: workflowId.slice(0, slash), runId: rest };
}
