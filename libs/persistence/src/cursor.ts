import { createHmac, timingSafeEqual } from 'node:crypto';

export interface RunCursor {
  createdAt: string;
  runId: string;
  /** The org the cursor was issued to; signed with the rest, so it cannot be swapped. */
  org?: string;
}

export class CursorError extends Error {}

/**
 * Keyset cursors are opaque to clients and signed, so a tampered or forged cursor is refused
 * instead of silently paging from somewhere else.
 */
export class CursorCodec {
  constructor(private readonly secret: string) {}

  encode(cursor: RunCursor): string {
    const fields = cursor.org === undefined ? [cursor.createdAt, cursor.runId] : [cursor.createdAt, cursor.runId, cursor.org];
    const body = Buffer.from(JSON.stringify(fields)).toString('base64url');
    return `${body}.${this.sign(body)}`;
  }

  decode(token: string): RunCursor {
    const [body, signature, extra] = token.split('.');
    if (!body || !signature || extra !== undefined) throw new CursorError('cursor is malformed');
    const expected = Buffer.from(this.sign(body));
    const given = Buffer.from(signature);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) {
      throw new CursorError('cursor was not issued by this server or has been altered');
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
    } catch {
      throw new CursorError('cursor is malformed');
    }
    if (!Array.isArray(parsed) || typeof parsed[0] !== 'string' || typeof parsed[1] !== 'string' || Number.isNaN(Date.parse(parsed[0]))) {
      throw new CursorError('cursor is malformed');
    }
    return { createdAt: parsed[0], runId: parsed[1], ...(typeof parsed[2] === 'string' ? { org: parsed[2] } : {}) };
  }

  private sign(body: string): string {
    return createHmac('sha256', this.secret).update(body).digest('base64url').slice(0, 22);
  }
}
