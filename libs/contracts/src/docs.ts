import { COMMAND_ENVELOPE_SCHEMA, COMMAND_PAYLOAD_SCHEMAS, COMMAND_TYPES } from './commands';
import { AGENT_STATE_SCHEMA, RUN_EVENT_SCHEMA, RUN_EVENT_TYPES } from './events';
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
    '## Statuses',
    '',
    `Agent: ${list(AGENT_STATUSES)}. Eval: ${list(EVAL_STATUSES)}. Terminal: ${list(TERMINAL_STATUSES)}.`,
    'Nothing leaves a terminal status, and nothing returns to `queued`.',
    '',
  ].join('\n');
}
