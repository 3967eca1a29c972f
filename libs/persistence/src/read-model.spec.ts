import type { RunEventEnvelope } from '@agentrun/contracts';
import { CursorCodec, CursorError } from './cursor';
import { parseRunTouches } from './projection';
import { contiguousPrefix } from './read-model';

const at = (seq: number) => ({ seq }) as RunEventEnvelope;

describe('the contiguous prefix a stream may send', () => {
  it('sends seqs after the resume point up to the first gap', () => {
    expect(contiguousPrefix([at(1), at(2), at(3)], 0).map((e) => e.seq)).toEqual([1, 2, 3]);
    expect(contiguousPrefix([at(3), at(4), at(6)], 2).map((e) => e.seq)).toEqual([3, 4]);
    expect(contiguousPrefix([at(5)], 3)).toEqual([]);
    expect(contiguousPrefix([at(2), at(3), at(4)], 3).map((e) => e.seq)).toEqual([4]);
  });
});

describe('list cursors', () => {
  const codec = new CursorCodec('secret');

  it('round-trips', () => {
    const cursor = { createdAt: '2026-11-29T17:00:00.000Z', runId: 'agent-1' };
    expect(codec.decode(codec.encode(cursor))).toEqual(cursor);
  });

  it('refuses a cursor that was altered, forged with another key, or is not a cursor', () => {
    const token = codec.encode({ createdAt: '2026-11-29T17:00:00.000Z', runId: 'agent-1' });
    const [body, sig] = token.split('.');
    const forgedBody = Buffer.from(JSON.stringify(['2030-01-01T00:00:00.000Z', 'agent-1'])).toString('base64url');
    expect(() => codec.decode(`${forgedBody}.${sig}`)).toThrow(CursorError);
    expect(() => new CursorCodec('other').decode(token)).toThrow(CursorError);
    expect(() => codec.decode(body)).toThrow(CursorError);
    expect(() => codec.decode("' OR 1=1 --")).toThrow(CursorError);
    expect(() => codec.decode(`${token}.x`)).toThrow(CursorError);
  });

  it('carries the org it was issued to under the signature, so the org cannot be swapped', () => {
    const cursor = { createdAt: '2026-11-29T17:00:00.000Z', runId: 'agent-1', org: 'acme' };
    const token = codec.encode(cursor);
    expect(codec.decode(token)).toEqual(cursor);
    const [, sig] = token.split('.');
    const swapped = Buffer.from(JSON.stringify([cursor.createdAt, cursor.runId, 'globex'])).toString('base64url');
    expect(() => codec.decode(`${swapped}.${sig}`)).toThrow(CursorError);
  });
});

describe('NOTIFY payloads', () => {
  it('reads the touched runs, and treats anything else as "look at everything"', () => {
    expect(parseRunTouches('[["acme","r1",4]]')).toEqual([{ org: 'acme', run_id: 'r1', seq: 4 }]);
    expect(parseRunTouches('*')).toBeUndefined();
    expect(parseRunTouches('garbage')).toBeUndefined();
    expect(parseRunTouches(undefined)).toBeUndefined();
  });
});
