import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The one signature Kafka records carry (signed commands and signed run events alike): lowercase hex
 * HMAC-SHA256 of the record value's exact bytes. It covers the bytes sent, so a reader checks it before
 * parsing and no canonical form of the JSON is needed. A text key is used as its UTF-8 bytes.
 */
export const RECORD_SIGNATURE_HEX = /^[0-9a-f]{64}$/;

export function signRecordValue(key: Buffer | string, value: Buffer | string): string {
  return createHmac('sha256', key).update(value).digest('hex');
}

/** Whether `given` (already lowercased) is the signature of `value` under `key`; compared in constant time. */
export function recordSignatureMatches(key: Buffer | string, value: Buffer | string, given: string): boolean {
  return RECORD_SIGNATURE_HEX.test(given) && timingSafeEqual(Buffer.from(given, 'hex'), createHmac('sha256', key).update(value).digest());
}
