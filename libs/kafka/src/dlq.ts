import type { DlqReason, DlqRecord } from '@agentrun/contracts';
import type { InboundMessage, OutboundMessage } from './bus';

/** Wraps a message that could not be read, keeping its bytes and where it came from. */
export function dlqMessage(message: InboundMessage, reason: DlqReason, detail: string, now: Date = new Date()): OutboundMessage {
  if (message.undecodable) return undecodableDlqMessage(message, now);
  const record: DlqRecord = {
    reason,
    detail,
    original_base64: (message.value ?? Buffer.alloc(0)).toString('base64'),
    source: { topic: message.topic, partition: message.partition, offset: message.offset },
    ts: now.toISOString(),
  };
  return { key: message.key?.toString('utf8') ?? '', value: JSON.stringify(record) };
}

/**
 * A record batch the consumer could not read (`message.undecodable`): `undecodable_batch`, with the
 * batch's first and last offsets, the codec's error as the detail, and the batch as the broker sent it
 * (header and compressed records) when it is small enough to keep.
 */
export function undecodableDlqMessage(message: InboundMessage, now: Date = new Date()): OutboundMessage {
  const batch = message.undecodable;
  if (!batch) throw new Error(`${message.topic}/${message.partition}@${message.offset} is a record, not an undecodable batch`);
  const record: DlqRecord = {
    reason: 'undecodable_batch',
    detail: `${batch.reason}${batch.bytes.length ? '' : ' (the batch is too large to keep here)'}`,
    original_base64: batch.bytes.toString('base64'),
    source: { topic: message.topic, partition: message.partition, offset: batch.baseOffset, last_offset: batch.lastOffset },
    ts: now.toISOString(),
  };
  return { key: '', value: JSON.stringify(record) };
}
