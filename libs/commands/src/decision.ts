import type { RejectionReason } from '@agentrun/contracts';

/** What a handler decided about one command; the service turns it into the outcome record. */
export type CommandDecision =
  | { outcome: 'accepted'; message?: string }
  /** `error_id`: only on `internal_error`, the id its detail was logged under. */
  | { outcome: 'rejected'; reason: RejectionReason; message: string; error_id?: string };

export function accepted(message?: string): CommandDecision {
  return message ? { outcome: 'accepted', message } : { outcome: 'accepted' };
}

export function rejected(reason: RejectionReason, message: string): CommandDecision {
  return { outcome: 'rejected', reason, message };
}
