import { createHmac } from 'node:crypto';
import { EVENT_KEY_ID_HEADER, EVENT_SIGNATURE_HEADER, EventSigner, EventVerifier } from './event-signing';

const oldKey = { kid: 'k2026a', secret: Buffer.from('a'.repeat(64)) };
const newKey = { kid: 'k2026b', secret: Buffer.from('b'.repeat(64)) };
const value = JSON.stringify({ run_id: 'r1', org: 'acme', kind: 'agent', seq: 1, type: 'run_started', ts: '2026-12-01T00:00:00.000Z', payload: {} });

describe('run event signing', () => {
  it('signs the exact value bytes with HMAC-SHA256, hex, and names the key', () => {
    const headers = new EventSigner(oldKey).headers(value);
    expect(headers).toEqual({
      [EVENT_KEY_ID_HEADER]: 'k2026a',
      [EVENT_SIGNATURE_HEADER]: createHmac('sha256', oldKey.secret).update(Buffer.from(value)).digest('hex'),
    });
  });

  it('accepts a record signed with any listed key: old and new both pass during a rotation', () => {
    const verifier = new EventVerifier([oldKey, newKey]);
    expect(verifier.verify(Buffer.from(value), new EventSigner(oldKey).headers(value))).toEqual({ ok: true, kid: 'k2026a' });
    expect(verifier.verify(Buffer.from(value), new EventSigner(newKey).headers(value))).toEqual({ ok: true, kid: 'k2026b' });
    const upper = new EventSigner(newKey).headers(value);
    upper[EVENT_SIGNATURE_HEADER] = upper[EVENT_SIGNATURE_HEADER].toUpperCase();
    expect(verifier.verify(Buffer.from(value), upper).ok).toBe(true);
  });

  it('refuses an unsigned record, naming the missing header', () => {
    const verifier = new EventVerifier([oldKey]);
    expect(verifier.verify(Buffer.from(value), undefined)).toMatchObject({ ok: false, reason: 'unsigned', detail: expect.stringContaining(EVENT_KEY_ID_HEADER) });
    expect(verifier.verify(Buffer.from(value), { [EVENT_KEY_ID_HEADER]: 'k2026a' })).toMatchObject({ ok: false, reason: 'unsigned', detail: expect.stringContaining(EVENT_SIGNATURE_HEADER) });
  });

  it('refuses a key id it does not know: a removed key no longer verifies', () => {
    const verifier = new EventVerifier([newKey]);
    const verdict = verifier.verify(Buffer.from(value), new EventSigner(oldKey).headers(value));
    expect(verdict).toMatchObject({ ok: false, reason: 'unknown_key', detail: expect.stringContaining("'k2026a'") });
    const odd = verifier.verify(Buffer.from(value), { [EVENT_KEY_ID_HEADER]: 'x'.repeat(500), [EVENT_SIGNATURE_HEADER]: '00' });
    expect(odd).toMatchObject({ ok: false, reason: 'unknown_key', detail: expect.stringContaining('malformed key id') });
  });

  it('refuses a wrong secret under a known id, a changed value and a malformed signature, and never shows a secret', () => {
    const verifier = new EventVerifier([oldKey]);
    const forger = new EventSigner({ kid: 'k2026a', secret: Buffer.from('guessed') });
    const cases = [
      verifier.verify(Buffer.from(value), forger.headers(value)),
      verifier.verify(Buffer.from(value.replace('run_started', 'run_finished')), new EventSigner(oldKey).headers(value)),
      verifier.verify(Buffer.from(value), { [EVENT_KEY_ID_HEADER]: 'k2026a', [EVENT_SIGNATURE_HEADER]: 'zz' }),
      verifier.verify(Buffer.from(value), { [EVENT_KEY_ID_HEADER]: 'k2026a', [EVENT_SIGNATURE_HEADER]: 'ab'.repeat(16) }),
      verifier.verify(null, new EventSigner(oldKey).headers(value)),
    ];
    for (const verdict of cases) {
      expect(verdict).toMatchObject({ ok: false, reason: 'bad_signature' });
      expect(JSON.stringify(verdict)).not.toContain('aaaa');
    }
  });
});
