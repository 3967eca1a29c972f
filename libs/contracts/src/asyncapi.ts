import { COMMAND_ENVELOPE_SCHEMA, COMMAND_PAYLOAD_SCHEMAS, COMMAND_TYPES } from './commands';
import { EVAL_STATE_SCHEMA, AGENT_STATE_SCHEMA, RUN_EVENT_DESCRIPTIONS, RUN_EVENT_KINDS, RUN_EVENT_PAYLOAD_SCHEMAS, RUN_EVENT_SCHEMA, RUN_EVENT_TYPES, SNAPSHOT_ROW_SCHEMA } from './events';
import { COMMAND_KEY_ID_HEADER, COMMAND_SIGNATURE_HEADER, MAX_COMMAND_BYTES, ORG_PATTERN, RUN_EVENT_SIGNATURE_HEADERS, RUN_ID_PATTERN, TOPICS } from './names';
import { COMMAND_OUTCOME_SCHEMA, DLQ_RECORD_SCHEMA } from './outcomes';
import { RUN_STATE_RECORD_SCHEMA } from './run-state';
import { RUN_TOKEN_DELTA_SCHEMA } from './tokens';
import { plainSchema } from './schema';

const KAFKA_BINDING = '0.5.0';
const JSON_SCHEMA = 'application/schema+json;version=draft-07';

/** A schema as a multi-format payload: the catalogue's schemas are JSON Schema, not AsyncAPI's own dialect. */
const payload = (schema: object) => ({ schemaFormat: JSON_SCHEMA, schema: withoutIds(plainSchema(schema)) });

// `$id`s name our schema resources for ajv; inside one document they would collide.
function withoutIds(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutIds);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(Object.entries(value).filter(([key]) => key !== '$id').map(([key, child]) => [key, withoutIds(child)]));
}

const runIdKey = { type: 'string', pattern: RUN_ID_PATTERN, description: 'the run id, so every record of a run lands on one partition, in order' };
const orgRunKey = { type: 'string', pattern: `${ORG_PATTERN.slice(0, -1)}/${RUN_ID_PATTERN.slice(1)}`, description: '`{org}/{run_id}`: one key per run, so compaction keeps its newest state' };

const channel = (address: string, description: string, messages: Record<string, string>, compacted = false) => ({
  address,
  description,
  messages: Object.fromEntries(Object.entries(messages).map(([name, ref]) => [name, { $ref: `#/components/messages/${ref}` }])),
  bindings: { kafka: { topicConfiguration: { 'cleanup.policy': [compacted ? 'compact' : 'delete'] }, bindingVersion: KAFKA_BINDING } },
});

const operation = (action: 'send' | 'receive', channelName: string, messageNames: string[], summary: string) => ({
  action,
  summary,
  channel: { $ref: `#/channels/${channelName}` },
  messages: messageNames.map((name) => ({ $ref: `#/channels/${channelName}/messages/${name}` })),
});

const eventMessageName = (type: string) => `runEvent.${type}`;

/**
 * The AsyncAPI 3.0 document of the topics, from the platform's side: what it receives and what it
 * sends. Written to docs/asyncapi.yaml by `npm run docs:contracts`; a unit test keeps the two equal.
 */
export function asyncApiDocument(): Record<string, unknown> {
  const eventMessages = Object.fromEntries(
    RUN_EVENT_TYPES.map((type) => [
      eventMessageName(type),
      {
        name: type,
        title: `Run event \`${type}\``,
        summary: RUN_EVENT_DESCRIPTIONS[type],
        description: `Published by ${RUN_EVENT_KINDS[type].join(' and ')} runs. The envelope is the same for every type; \`payload\` is this type's.`,
        contentType: 'application/json',
        headers: { $ref: '#/components/schemas/RunEventHeaders' },
        payload: payload({
          allOf: [withoutIds(plainSchema(RUN_EVENT_SCHEMA)), { type: 'object', properties: { type: { const: type }, payload: withoutIds(plainSchema(RUN_EVENT_PAYLOAD_SCHEMAS[type])) } }],
        }),
        bindings: { kafka: { key: runIdKey, bindingVersion: KAFKA_BINDING } },
      },
    ]),
  );
  return {
    asyncapi: '3.0.0',
    info: {
      title: 'AgentRun topics',
      version: '1.0.0',
      description: [
        'The Kafka topics of the AgentRun platform, version 1. Every value is UTF-8 JSON.',
        'Records are read in any Kafka codec (gzip, snappy, lz4, zstd), whoever produced them and whatever the topic\'s compression.type.',
        'What AgentRun sends is uncompressed unless the deployment sets KAFKA_COMPRESSION (none, gzip, snappy, lz4 or zstd).',
        'A record batch a consumer cannot decompress or decode goes to its DLQ whole (reason undecodable_batch) and the partition moves on.',
        'Readers ignore fields and event types they do not know; a breaking change is a new topic version.',
        'Generated from libs/contracts by `npm run docs:contracts`; do not edit by hand.',
      ].join('\n'),
    },
    defaultContentType: 'application/json',
    channels: {
      commands: channel(TOPICS.commands, `Commands to runs, at most ${MAX_COMMAND_BYTES} bytes each.`, { command: 'command' }),
      commandResults: channel(TOPICS.commandResults, 'One outcome per command read.', { outcome: 'commandOutcome' }),
      commandsDlq: channel(TOPICS.commandsDlq, 'Commands that could not be read, with their bytes and the reason.', { dlqRecord: 'dlqRecord' }),
      runEvents: channel(TOPICS.runEvents, 'Run events, seq 1, 2, 3, ... per run. Readers ignore types they do not know.', Object.fromEntries(RUN_EVENT_TYPES.map((type) => [type, eventMessageName(type)]))),
      runEventsDlq: channel(TOPICS.runEventsDlq, 'Run events the projector could not verify or read.', { dlqRecord: 'dlqRecord' }),
      runState: channel(TOPICS.runState, 'The latest state of each run, published by the projector after every commit. Compacted: the newest record per key stays.', { runState: 'runStateRecord' }, true),
      runTokens: channel(TOPICS.runTokens, "Model replies as they are written, keyed by run id: live only, never stored; the step's `step_completed` records the whole message.", { runToken: 'runTokenDelta' }),
    },
    operations: {
      receiveCommand: operation('receive', 'commands', ['command'], 'The orchestrator reads each command once per command id.'),
      sendCommandOutcome: operation('send', 'commandResults', ['outcome'], 'Accepted, duplicate or rejected (with a reason), for every readable command.'),
      sendCommandToDlq: operation('send', 'commandsDlq', ['dlqRecord'], 'A command value that is not JSON, too large, or without a command id or org; or a whole record batch that could not be decompressed or decoded (undecodable_batch).'),
      sendRunEvent: operation('send', 'runEvents', [...RUN_EVENT_TYPES], 'The workflows publish events in seq order through their outbox.'),
      receiveRunEvent: operation('receive', 'runEvents', [...RUN_EVENT_TYPES], 'The projector applies events to the read model.'),
      sendRunEventToDlq: operation('send', 'runEventsDlq', ['dlqRecord'], 'An event that is unsigned, signed with a key the projector does not accept or with a signature that does not match, or whose envelope cannot be read; or a whole record batch that could not be decompressed or decoded (undecodable_batch).'),
      sendRunState: operation('send', 'runState', ['runState'], 'After every commit, the state of each run the commit touched.'),
      sendRunToken: operation('send', 'runTokens', ['runToken'], 'While a model call streams, its deltas, batched as they come; a retried call starts again at index 0 with its new attempt.'),
      receiveRunToken: operation('receive', 'runTokens', ['runToken'], 'Every gateway reads them all and sends each to the SSE streams of its run as a `token` frame without an id.'),
    },
    components: {
      messages: {
        command: {
          name: 'command',
          title: 'Command',
          summary: 'The envelope every command shares; `payload` is checked against its type (see the schemas `payload.<type>`).',
          contentType: 'application/json',
          headers: { $ref: '#/components/schemas/CommandHeaders' },
          payload: payload({
            allOf: [withoutIds(plainSchema(COMMAND_ENVELOPE_SCHEMA))],
            oneOf: COMMAND_TYPES.map((type) => ({ properties: { type: { const: type }, payload: withoutIds(plainSchema(COMMAND_PAYLOAD_SCHEMAS[type])) } })),
          }),
          bindings: { kafka: { key: runIdKey, bindingVersion: KAFKA_BINDING } },
        },
        commandOutcome: {
          name: 'commandOutcome',
          title: 'Command outcome',
          contentType: 'application/json',
          payload: payload(COMMAND_OUTCOME_SCHEMA),
          bindings: { kafka: { key: runIdKey, bindingVersion: KAFKA_BINDING } },
        },
        dlqRecord: {
          name: 'dlqRecord',
          title: 'DLQ record',
          summary: 'The original bytes (base64), where they came from and why they could not be read.',
          contentType: 'application/json',
          payload: payload(DLQ_RECORD_SCHEMA),
          bindings: { kafka: { key: { type: 'string', description: 'the original record key, empty when it had none' }, bindingVersion: KAFKA_BINDING } },
        },
        runStateRecord: {
          name: 'runStateRecord',
          title: 'Run state',
          summary: 'The state of the last event applied to the run, with that event\'s seq, type and time.',
          contentType: 'application/json',
          payload: payload(RUN_STATE_RECORD_SCHEMA),
          bindings: { kafka: { key: orgRunKey, bindingVersion: KAFKA_BINDING } },
        },
        runTokenDelta: {
          name: 'runTokenDelta',
          title: 'Run token delta',
          summary: 'One piece of a model reply: its run, step, attempt and place.',
          contentType: 'application/json',
          payload: payload(RUN_TOKEN_DELTA_SCHEMA),
          bindings: { kafka: { key: runIdKey, bindingVersion: KAFKA_BINDING } },
        },
        ...eventMessages,
      },
      schemas: {
        CommandHeaders: {
          type: 'object',
          description: 'The org credential (production mode; ignored in local mode). A command without a valid pair is answered `rejected` / `unauthorized`. Optionally, W3C trace context.',
          properties: {
            [COMMAND_KEY_ID_HEADER]: { type: 'string', pattern: '^ck_[0-9a-f]{16}$', description: 'the id of a command key issued to the org the command names' },
            [COMMAND_SIGNATURE_HEADER]: { type: 'string', pattern: '^[0-9a-f]{64}$', description: "HMAC-SHA256 of the record's exact value bytes, keyed by the command key's text, in lowercase hex" },
            traceparent: { type: 'string', pattern: '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$', description: 'optional W3C trace context (OpenTelemetry): the run started or steered by this command continues this trace' },
            tracestate: { type: 'string', description: 'optional W3C trace state, with traceparent' },
          },
        },
        RunEventHeaders: {
          type: 'object',
          properties: {
            org: { type: 'string', description: 'the event\'s org' },
            seq: { type: 'string', pattern: '^[1-9][0-9]*$', description: 'the event\'s seq, in decimal' },
            type: { type: 'string', description: 'the event\'s type' },
            [RUN_EVENT_SIGNATURE_HEADERS.keyId]: { type: 'string', pattern: '^[A-Za-z0-9._-]{1,64}$', description: 'the id of the key the event was signed with (keys rotate by id)' },
            [RUN_EVENT_SIGNATURE_HEADERS.signature]: { type: 'string', pattern: '^[0-9a-f]{64}$', description: 'hex HMAC-SHA256 of the record\'s value bytes under that key; the projector dead-letters an event without a valid one' },
            traceparent: { type: 'string', pattern: '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$', description: 'the W3C trace context of the span that published the event, when its run is in a trace; not covered by the signature' },
          },
          required: [RUN_EVENT_SIGNATURE_HEADERS.keyId, RUN_EVENT_SIGNATURE_HEADERS.signature],
        },
        AgentRunState: payload(AGENT_STATE_SCHEMA),
        EvalRunState: payload(EVAL_STATE_SCHEMA),
        SnapshotRow: payload(SNAPSHOT_ROW_SCHEMA),
      },
    },
  };
}
