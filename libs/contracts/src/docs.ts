import { COMMAND_ENVELOPE_SCHEMA, COMMAND_PAYLOAD_SCHEMAS, COMMAND_TYPES } from './commands';
import { AGENT_STATE_SCHEMA, CAPTURE_STATUSES, RUN_EVENT_SCHEMA, RUN_EVENT_TYPES } from './events';
import { MAX_COMMAND_BYTES, SEARCH_ATTRIBUTES, TASK_QUEUES, TOPICS } from './names';
import { COMMAND_OUTCOME_SCHEMA, DLQ_REASONS, DLQ_RECORD_SCHEMA, REJECTION_REASONS } from './outcomes';
import { AGENT_STATUSES, EVAL_STATUSES, TERMINAL_STATUSES } from './statuses';

const json = (value: unknown) => '```json\n' + JSON.stringify(value, null, 2) + '\n```';
const list = (values: readonly string[]) => values.map((v) => `\`${v}\``).join(', ');

/** docs/CONTRACTS.md, generated from the schemas so the two cannot drift (a unit test compares them). */
export function renderContractsDoc(): string {
  return [
    '# Public contracts, version 1',
    '',
    '<!-- Generated from libs/contracts by `npm run docs:contracts`; do not edit by hand. -->',
    '',
    'Consumers ignore fields and event types they do not know; a breaking change is a new topic version.',
    '',
    '## Topics',
    '',
    '| name | carries |',
    '| --- | --- |',
    `| \`${TOPICS.commands}\` | commands (JSON, at most ${MAX_COMMAND_BYTES} bytes), keyed by run id |`,
    `| \`${TOPICS.commandResults}\` | one outcome per command, keyed by run id |`,
    `| \`${TOPICS.commandsDlq}\` | commands that could not be read, with their bytes and reason |`,
    `| \`${TOPICS.runEvents}\` | run events, keyed by run id, seq 1, 2, 3, ... per run |`,
    `| \`${TOPICS.runEventsDlq}\` | run events the projector could not read |`,
    '',
    `Task queues: ${list(Object.values(TASK_QUEUES))}. Search attributes: ${Object.entries(SEARCH_ATTRIBUTES)
      .map(([k, v]) => `\`${k}\` (${v})`)
      .join(', ')}.`,
    '',
    '## Command',
    '',
    json(COMMAND_ENVELOPE_SCHEMA),
    '',
    ...COMMAND_TYPES.flatMap((type) => [`### \`${type}\` payload`, '', json(COMMAND_PAYLOAD_SCHEMAS[type]), '']),
    '## Outcome',
    '',
    `Reasons: ${list(REJECTION_REASONS)}.`,
    '',
    json(COMMAND_OUTCOME_SCHEMA),
    '',
    '## DLQ record',
    '',
    `Reasons: ${list(DLQ_REASONS)}.`,
    '',
    json(DLQ_RECORD_SCHEMA),
    '',
    '## Run event',
    '',
    `Known types: ${list(RUN_EVENT_TYPES)}.`,
    '',
    json(RUN_EVENT_SCHEMA),
    '',
    '### Agent state (`payload.state` of an agent run)',
    '',
    json(AGENT_STATE_SCHEMA),
    '',
    '### Snapshot rows (`payload.snapshot` of `snapshot_captured`)',
    '',
    'One row per capture (or skipped capture), published the moment it lands, in order. The reference\'s fields and names:',
    '`snapshot_id` (`snap-0001`, ... unique in the run), `turn` (1-based, turn-boundary rows only), `id` and `version` (the',
    'workspace artifact and the capture ordinal), `bundle_object_url`, `bytes`, `source_agent_name`, `source_context_id`',
    '(the run id), `elapsed_s`, `captured_at_utc`, `is_final`, `capture_status` (' + list(CAPTURE_STATUSES) + '),',
    '`capture_reason` (e.g. `capture_timeout_300s`, `limit_reached`, `cancelled`, `final_capture_lock_timeout`),',
    '`trajectory_s3_uri`, `env_universe_id` and `env_universe_version` (the fork state), and `step`. A row is usable',
    '(gradable, forkable) when it has a `bundle_object_url`; `partial` still has one.',
    '',
    '## Statuses',
    '',
    `Agent: ${list(AGENT_STATUSES)}. Eval: ${list(EVAL_STATUSES)}. Terminal: ${list(TERMINAL_STATUSES)}.`,
    'Nothing leaves a terminal status, and nothing returns to `queued`.',
    '',
  ].join('\n');
}
