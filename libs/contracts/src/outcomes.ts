import type { CommandType } from './commands';

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
] as const;
export type RejectionReason = (typeof REJECTION_REASONS)[number];

/** One record per command on `agentrun.command-results.v1`. */
export interface CommandOutcome {
  command_id: string;
  org: string;
  run_id: string;
  type: CommandType | string;
  outcome: Outcome;
  reason?: RejectionReason;
  message?: string;
  ts: string;
}

export const COMMAND_OUTCOME_SCHEMA = {
  $id: 'https://agentrun.dev/schemas/command-outcome.v1.json',
  title: 'CommandOutcome',
  type: 'object',
  required: ['command_id', 'org', 'run_id', 'type', 'outcome', 'ts'],
  properties: {
    command_id: { type: 'string' },
    org: { type: 'string' },
    run_id: { type: 'string' },
    type: { type: 'string' },
    outcome: { enum: OUTCOMES },
    reason: { enum: REJECTION_REASONS },
    message: { type: 'string' },
    ts: { type: 'string', format: 'date-time' },
  },
} as const;

export const DLQ_REASONS = ['not_json', 'not_a_command', 'too_large', 'not_an_event'] as const;
export type DlqReason = (typeof DLQ_REASONS)[number];

/** What a DLQ holds: the original bytes and why they could not be read. */
export interface DlqRecord {
  reason: DlqReason;
  detail: string;
  original_base64: string;
  source: { topic: string; partition: number; offset: string };
  ts: string;
}

export const DLQ_RECORD_SCHEMA = {
  $id: 'https://agentrun.dev/schemas/dlq-record.v1.json',
  title: 'DlqRecord',
  type: 'object',
  required: ['reason', 'detail', 'original_base64', 'source', 'ts'],
  properties: {
    reason: { enum: DLQ_REASONS },
    detail: { type: 'string' },
    original_base64: { type: 'string' },
    source: {
      type: 'object',
      required: ['topic', 'partition', 'offset'],
      properties: { topic: { type: 'string' }, partition: { type: 'integer' }, offset: { type: 'string' } },
    },
    ts: { type: 'string', format: 'date-time' },
  },
} as const;
