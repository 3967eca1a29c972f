import type { RejectionReason } from '@agentrun/contracts';

/** What a handler decided about one command; the service turns it into the outcome record. */
export type CommandDecision = { outcome: 'accepted'; message?: string } | { outcome: 'rejected'; reason: RejectionReason; message: string };

export function accepted(message?: string): CommandDecision {
  return message ? { outcome: 'accepted', message } : { outcome: 'accepted' };
}

export function rejected(reason: RejectionReason, message: string): CommandDecision {
  return { outcome: 'rejected', reason, message };
}
