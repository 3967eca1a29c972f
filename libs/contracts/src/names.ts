/** Topic, lane and attribute names: spelled once here, imported by every app, worker and test. */

export const TOPICS = {
  commands: 'agentrun.commands.v1',
  commandResults: 'agentrun.command-results.v1',
  commandsDlq: 'agentrun.commands.dlq.v1',
  runEvents: 'agentrun.run-events.v1',
  runEventsDlq: 'agentrun.run-events.dlq.v1',
  runState: 'agentrun.run-state.v1',
} as const;
export type TopicName = (typeof TOPICS)[keyof typeof TOPICS];

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
/** Orgs never contain `/`, so `{org}/{run_id}` splits back unambiguously. */
export const ORG_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$';
/** Snapshot ids are chosen by the run's workflow (`snap-0001`, ...): one per capture, unique within the run. */
export const SNAPSHOT_ID_PATTERN = RUN_ID_PATTERN;
export const COMMAND_ID_PATTERN = '^[\\x21-\\x7e]{1,128}$';

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
