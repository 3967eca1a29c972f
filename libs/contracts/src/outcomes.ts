import { Type, type Static } from '@sinclair/typebox';
import type { CommandType } from './commands';
import { StringEnum } from './schema';

export const OUTCOMES = ['accepted', 'duplicate', 'rejected'] as const;
export type Outcome = (typeof OUTCOMES)[number];

export const REJECTION_REASONS = [
  'invalid_payload',
  'unknown_type',
  'unknown_run',
  'run_exists',
  'wrong_kind',
  'run_closed',
  'validator_rejected',
  'not_a_reviewer',
  'nothing_to_retry',
  'run_active',
  'not_supported',
  'internal_error',
  'unknown_snapshot',
  'snapshot_unusable',
  /** An eval names a dataset the org does not have. */
  'unknown_dataset',
  /** An eval that is well formed but cannot run: its cases, scorers or endpoint do not fit (the message says which). */
  'invalid_eval',
  /** A start over one of the org's quotas (active runs, `max_steps`, snapshots per run); the message names the limit. */
  'quota_exceeded',
  /**
   * Production mode only: the command on Kafka carried no valid org credential (see
   * COMMAND_KEY_ID_HEADER). Nothing else about it was looked at, so the answer is the same whether
   * or not the run exists, and the command id stays free for the properly signed command.
   */
  'unauthorized',
] as const;
export type RejectionReason = (typeof REJECTION_REASONS)[number];

/** One record per command on `agentrun.command-results.v1`. */
export const COMMAND_OUTCOME_SCHEMA = Type.Object(
  {
    command_id: Type.String(),
    org: Type.String(),
    run_id: Type.String(),
    // Any type is answered, an unknown one included (with `unknown_type`).
    type: Type.Unsafe<CommandType | (string & {})>({ type: 'string' }),
    outcome: StringEnum(OUTCOMES),
    reason: Type.Optional(StringEnum(REJECTION_REASONS)),
    message: Type.Optional(Type.String()),
    /**
     * On `internal_error` only: the id the service logged the unexpected error under, with its detail.
     * The message then says no more than that; the error's own text stays in the service's logs.
     */
    error_id: Type.Optional(Type.String()),
    ts: Type.String({ format: 'date-time' }),
  },
  { $id: 'https://agentrun.dev/schemas/command-outcome.v1.json', title: 'CommandOutcome' },
);
export type CommandOutcome = Static<typeof COMMAND_OUTCOME_SCHEMA>;

/**
 * Why a record was dead-lettered. On the run-events DLQ, `unsigned`, `unknown_key` and `bad_signature` mean the
 * record's signature headers were missing, named a key the projector does not accept, or did not match its bytes.
 * `undecodable_batch` (any DLQ) is a whole record batch the consumer could not decompress or decode: its
 * `source` gives the batch's first offset and `last_offset`, `original_base64` the batch as the broker sent it
 * (empty when over 256 KiB), and the partition moves on past it.
 */
export const DLQ_REASONS = ['not_json', 'not_a_command', 'too_large', 'not_an_event', 'unsigned', 'unknown_key', 'bad_signature', 'undecodable_batch'] as const;
export type DlqReason = (typeof DLQ_REASONS)[number];

/** What a DLQ holds: the original bytes and why they could not be read. */
export const DLQ_RECORD_SCHEMA = Type.Object(
  {
    reason: StringEnum(DLQ_REASONS),
    detail: Type.String(),
    original_base64: Type.String(),
    source: Type.Object({
      topic: Type.String(),
      partition: Type.Integer(),
      /** The record's offset; for `undecodable_batch`, the batch's first. */
      offset: Type.String(),
      /** `undecodable_batch` only: the batch's last offset. */
      last_offset: Type.Optional(Type.String()),
    }),
    ts: Type.String({ format: 'date-time' }),
  },
  { $id: 'https://agentrun.dev/schemas/dlq-record.v1.json', title: 'DlqRecord' },
);
export type DlqRecord = Static<typeof DLQ_RECORD_SCHEMA>;
