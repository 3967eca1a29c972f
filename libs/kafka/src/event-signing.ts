import { RUN_EVENT_SIGNATURE_HEADERS } from '@agentrun/contracts';
import { recordSignatureMatches, signRecordValue } from './record-signature';

/** The header naming the key a run event was signed with, so keys can rotate without a flag day. */
export const EVENT_KEY_ID_HEADER = RUN_EVENT_SIGNATURE_HEADERS.keyId;
/** The header holding the hex HMAC-SHA256 of the record's value bytes. */
export const EVENT_SIGNATURE_HEADER = RUN_EVENT_SIGNATURE_HEADERS.signature;

/** Key ids as the settings allow them (libs/config): anything else is shown as malformed, not echoed. */
const EVENT_KEY_ID_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;

/** One signing key, as the settings read it (`AGENTRUN_EVENT_KEYS`). */
export interface EventKey {
  kid: string;
  secret: Buffer;
}

/** Why a record was refused; the projector turns each into the run-events DLQ reason of the same name. */
export type EventVerdict = { ok: true; kid: string } | { ok: false; reason: 'unsigned' | 'unknown_key' | 'bad_signature'; detail: string };

/** Signs record values with one key (see record-signature.ts for what the signature covers). */
export class EventSigner {
  constructor(private readonly key: EventKey) {}

  get kid(): string {
    return this.key.kid;
  }

  headers(value: Buffer | string): Record<string, string> {
    return { [EVENT_KEY_ID_HEADER]: this.key.kid, [EVENT_SIGNATURE_HEADER]: signRecordValue(this.key.secret, value) };
  }
}

/**
 * Checks a record's signature against every key it accepts (during a rotation, the old and the new).
 * The detail never contains key material, only the key id the record named.
 */
export class EventVerifier {
  private readonly keys: Map<string, Buffer>;

  constructor(keys: EventKey[]) {
    this.keys = new Map(keys.map((k) => [k.kid, k.secret]));
  }

  verify(value: Buffer | null, headers: Record<string, string | string[] | undefined> | undefined): EventVerdict {
    const kidHeader = headers?.[EVENT_KEY_ID_HEADER];
    const signatureHeader = headers?.[EVENT_SIGNATURE_HEADER];
    // A header sent twice could be read two ways (which one was checked?), so it is never accepted.
    if (Array.isArray(kidHeader) || Array.isArray(signatureHeader)) {
      return { ok: false, reason: 'bad_signature', detail: `${Array.isArray(kidHeader) ? EVENT_KEY_ID_HEADER : EVENT_SIGNATURE_HEADER} is repeated: a run event carries one key id and one signature` };
    }
    const kid = kidHeader;
    const signature = signatureHeader;
    if (kid === undefined || signature === undefined) {
      return { ok: false, reason: 'unsigned', detail: `no ${kid === undefined ? EVENT_KEY_ID_HEADER : EVENT_SIGNATURE_HEADER} header: run events must be signed by the publisher` };
    }
    const secret = this.keys.get(kid);
    if (!secret) {
      const shown = EVENT_KEY_ID_PATTERN.test(kid) ? `'${kid}'` : 'a malformed key id';
      return { ok: false, reason: 'unknown_key', detail: `signed with ${shown}, which is not among the keys this projector accepts (AGENTRUN_EVENT_KEYS)` };
    }
    if (!recordSignatureMatches(secret, value ?? Buffer.alloc(0), signature.toLowerCase())) {
      return { ok: false, reason: 'bad_signature', detail: `the ${EVENT_SIGNATURE_HEADER} header does not match the value for key '${kid}'` };
    }
    return { ok: true, kid };
  }
}
