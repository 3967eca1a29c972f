import type { DlqReason, DlqRecord } from '@agentrun/contracts';
import type { InboundMessage, OutboundMessage } from './bus';

/** Wraps a message that could not be read, keeping its bytes and where it came from. */
export function dlqMessage(message: InboundMessage, reason: DlqReason, detail: string, now: Date = new Date()): OutboundMessage {
  const record: DlqRecord = {
    reason,
    detail,
    original_base64: (message.value ?? Buffer.alloc(0)).toString('base64'),
    source: { topic: message.topic, partition: message.partition, offset: message.offset },
    ts: now.toISOString(),
  };
  return { key: message.key?.toString('utf8') ?? '', value: JSON.stringify(record) };
}
