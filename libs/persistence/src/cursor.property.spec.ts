import { createHmac } from 'node:crypto';
import * as fc from 'fast-check';
import type { DataSource } from 'typeorm';
import { CursorCodec, CursorError, type RunCursor } from './cursor';
import { ReadModel } from './read-model';

const codec = new CursorCodec('secret');
/** Any text, lone surrogates and NULs too: a cursor carries what the database gave it. */
const anyText = fc.oneof(fc.string({ unit: 'binary', maxLength: 40 }), fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)), maxLength: 10 }));
const isoTime = fc.date({ min: new Date('1970-01-01T00:00:00Z'), max: new Date('9999-12-31T23:59:59Z'), noInvalidDate: true }).map((d) => d.toISOString());
const cursorArb: fc.Arbitrary<RunCursor> = fc.record({ createdAt: isoTime, runId: anyText, org: anyText }, { requiredKeys: ['createdAt', 'runId'] });
const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/** Decoding either refuses with a CursorError or gives a cursor; anything else thrown fails the property. */
function decodeOrRefuse(token: string): RunCursor | CursorError {
  try {
    return codec.decode(token);
  } catch (err) {
    if (err instanceof CursorError) return err;
    throw err;
  }
}

describe('keyset cursors (properties)', () => {
  it('any cursor decodes to itself', () => {
    fc.assert(fc.property(cursorArb, (cursor) => expect(codec.decode(codec.encode(cursor))).toEqual(cursor)));
  });

  it('any one character changed, dropped or added, or the token cut, is refused with a CursorError', () => {
    const edit = fc.oneof(
      fc.record({ how: fc.constant('replace' as const), at: fc.nat(), by: fc.oneof(fc.constantFrom(...BASE64URL, '.', '=', ' '), fc.string({ unit: 'binary', minLength: 1, maxLength: 1 })) }),
      fc.record({ how: fc.constant('drop' as const), at: fc.nat() }),
      fc.record({ how: fc.constant('insert' as const), at: fc.nat(), by: fc.constantFrom(...BASE64URL, '.') }),
      fc.record({ how: fc.constant('cut' as const), at: fc.nat() }),
    );
    fc.assert(
      fc.property(cursorArb, edit, (cursor, e) => {
        const token = codec.encode(cursor);
        const i = e.at % token.length;
        const tampered =
          e.how === 'replace' ? token.slice(0, i) + e.by + token.slice(i + 1) : e.how === 'drop' ? token.slice(0, i) + token.slice(i + 1) : e.how === 'insert' ? token.slice(0, i) + e.by + token.slice(i) : token.slice(0, i);
        fc.pre(tampered !== token);
        const result = decodeOrRefuse(tampered);
        expect(result).toBeInstanceOf(CursorError);
        expect((result as CursorError).message).toMatch(/^cursor (is malformed|was not issued by this server or has been altered)$/);
      }),
    );
  });

  it("another server's cursor, and any string at all, is refused with a CursorError", () => {
    fc.assert(
      fc.property(cursorArb, anyText, fc.string({ minLength: 1, maxLength: 20 }), (cursor, junk, otherSecret) => {
        fc.pre(otherSecret !== 'secret');
        expect(decodeOrRefuse(new CursorCodec(otherSecret).encode(cursor))).toBeInstanceOf(CursorError);
        expect(decodeOrRefuse(junk)).toBeInstanceOf(CursorError);
      }),
    );
  });

  it('a correctly signed body that is not a cursor (any JSON, any bytes) is refused with a CursorError, never another error', () => {
    const sign = (body: string) => `${body}.${createHmac('sha256', 'secret').update(body).digest('base64url').slice(0, 22)}`;
    fc.assert(
      fc.property(fc.oneof(fc.jsonValue().map((v) => Buffer.from(JSON.stringify(v) ?? '').toString('base64url')), fc.uint8Array({ maxLength: 40 }).map((b) => Buffer.from(b).toString('base64url')), fc.string({ unit: 'binary', maxLength: 30 })), (body) => {
        fc.pre(body !== '' && !body.includes('.'));
        const result = decodeOrRefuse(sign(body));
        // Refused, or it really is a cursor: two strings, the first a time.
        const outcome = result instanceof CursorError ? 'refused' : { createdAt: typeof result.createdAt, runId: typeof result.runId, time: !Number.isNaN(Date.parse(result.createdAt)) };
        expect(['refused', { createdAt: 'string', runId: 'string', time: true }]).toContainEqual(outcome);
      }),
    );
  });
});

// ---------------------------------------------------------------------------------------------------
// Paging through the read model's runs with cursors, over an in-memory table.
// ---------------------------------------------------------------------------------------------------

interface Row {
  org: string;
  run_id: string;
  kind: string;
  status: string;
  created_at: Date;
}

/** `runs` in memory, answering the one query listRuns makes: its filters, its keyset condition, its order and its limit. */
function tableOf(rows: Row[]): DataSource {
  const compare = (a: { t: number; id: string }, b: { t: number; id: string }) => a.t - b.t || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
  const query = (sql: string, params: unknown[]) => {
    const p = (n: string) => params[Number(n) - 1];
    let out = rows.filter((r) => r.org === params[0]);
    for (const [, column, n] of sql.matchAll(/\b(kind|status|model) = \$(\d+)/g)) out = out.filter((r) => (r as unknown as Record<string, unknown>)[column] === p(n));
    const keyset = /\(created_at, run_id\) < \(\$(\d+)::timestamptz, \$(\d+)\)/.exec(sql);
    if (keyset) {
      const after = { t: Date.parse(p(keyset[1]) as string), id: p(keyset[2]) as string };
      out = out.filter((r) => compare({ t: r.created_at.getTime(), id: r.run_id }, after) < 0);
    }
    if (!/ORDER BY created_at DESC, run_id DESC LIMIT \$(\d+)$/.test(sql.trim())) throw new Error(`unexpected query: ${sql}`);
    const limit = Number(params[params.length - 1]);
    out.sort((a, b) => -compare({ t: a.created_at.getTime(), id: a.run_id }, { t: b.created_at.getTime(), id: b.run_id }));
    return Promise.resolve(out.slice(0, limit).map((r) => ({ ...r, model: null, parent_run_id: null, updated_at: r.created_at, last_seq: 1, state: { status: r.status } })));
  };
  return { query } as unknown as DataSource;
}

describe('paging with cursors (properties)', () => {
  // Few distinct times, so many runs share one and the run id decides.
  const row = fc.record({
    org: fc.constantFrom('acme', 'globex'),
    run_id: fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 4 }),
    kind: fc.constantFrom('agent', 'eval'),
    status: fc.constantFrom('running', 'done'),
    created_at: fc.integer({ min: 0, max: 5 }).map((s) => new Date(Date.UTC(2026, 0, 1) + s * 1000 + (s % 2))),
  });
  const table = fc.uniqueArray(row, { maxLength: 40, selector: (r) => `${r.org}\u0000${r.run_id}` });

  it('pages walked by cursor give every run of the org that matches, exactly once, newest first', async () => {
    await fc.assert(
      fc.asyncProperty(table, fc.integer({ min: 1, max: 5 }), fc.constantFrom('acme', 'globex'), fc.record({ kind: fc.constantFrom('agent', 'eval'), status: fc.constantFrom('running', 'done') }, { requiredKeys: [] }), async (rows, limit, org, filters) => {
        const model = new ReadModel(tableOf(rows));
        const seen: string[] = [];
        let after: RunCursor | undefined;
        for (let pages = 0; ; pages++) {
          if (pages > rows.length + 1) throw new Error('paging does not end');
          const page = await model.listRuns(org, filters, after, limit);
          seen.push(...page.runs.map((r) => r.run_id));
          if (!page.next) break;
          expect(page.runs).toHaveLength(limit);
          // As the gateway hands it out and takes it back: signed, with the org.
          const token = codec.encode({ ...page.next, org });
          after = codec.decode(token);
          expect(after.org).toBe(org);
        }
        const expected = rows
          .filter((r) => r.org === org && (filters.kind === undefined || r.kind === filters.kind) && (filters.status === undefined || r.status === filters.status))
          .sort((a, b) => b.created_at.getTime() - a.created_at.getTime() || (a.run_id < b.run_id ? 1 : a.run_id > b.run_id ? -1 : 0))
          .map((r) => r.run_id);
        expect(seen).toEqual(expected);
      }),
    );
  });
});
