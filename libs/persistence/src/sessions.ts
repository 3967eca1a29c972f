import { createHash, randomBytes } from 'node:crypto';
import { normaliseOrg } from '@agentrun/contracts';
import type { DataSource } from 'typeorm';
import type { TokenIdentity } from './tokens';

/** How long a session lives: without a request (idle) and at most (absolute), in seconds. */
export interface SessionLimits {
  idleSeconds: number;
  maxSeconds: number;
}

/** Who a live session speaks for. */
export interface SessionIdentity {
  org: string;
  subject: string | null;
  token_id: string;
}

/** A session id as the cookie carries it: 32 random bytes, base64url (43 characters, no padding). */
const SESSION_ID_RE = /^[A-Za-z0-9_-]{43}$/;

/** Sessions are touched at most this often, so a busy page costs a read per request, not a write. */
const TOUCH_EVERY_SECONDS = 60;

function hashSessionId(id: string): string {
  return createHash('sha256').update(id, 'utf8').digest('hex');
}

/**
 * Browser sessions kept on the server. The browser holds an opaque random id; only its hash is
 * stored, so reading the table yields no working cookie, and the API token the session was opened with
 * never leaves the sign-in request. A session answers only while it is unrevoked, younger than its
 * absolute limit, used within its idle limit, and the token it came from is still live.
 */
export class SessionStore {
  constructor(private readonly db: DataSource) {}

  /** Opens a session for a live token; returns the id for the cookie (shown only here) and when it ends at the latest. */
  async open(token: TokenIdentity, limits: SessionLimits): Promise<{ id: string; expiresAt: Date }> {
    const id = randomBytes(32).toString('base64url');
    const rows: { expires_at: Date }[] = await this.db.query(
      `INSERT INTO web_sessions (id_hash, org, subject, token_id, expires_at)
       VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5)) RETURNING expires_at`,
      [hashSessionId(id), normaliseOrg(token.org), token.subject, token.id, limits.maxSeconds],
    );
    // Rows long past their absolute limit answer nothing; dropping them here keeps the table bounded
    // without a sweeper of its own (the index on expires_at makes this a short range scan).
    await this.db.query(`DELETE FROM web_sessions WHERE expires_at < now() - interval '1 day'`);
    return { id, expiresAt: new Date(rows[0].expires_at) };
  }

  /**
   * Who a live session speaks for, or undefined. Marks it seen when its last mark is older than a
   * minute (or half the idle limit, when that is shorter), so the idle clock runs from about the
   * last request without a write on every one.
   */
  async lookup(id: string, limits: SessionLimits): Promise<SessionIdentity | undefined> {
    if (!SESSION_ID_RE.test(id)) return undefined;
    const idHash = hashSessionId(id);
    const rows: (SessionIdentity & { touch: boolean })[] = await this.db.query(
      `SELECT s.org, s.subject, s.token_id, s.last_seen_at < now() - make_interval(secs => $3) AS touch
       FROM web_sessions s JOIN api_tokens t ON t.id = s.token_id
       WHERE s.id_hash = $1 AND s.revoked_at IS NULL AND t.revoked_at IS NULL
         AND s.expires_at > now() AND s.last_seen_at > now() - make_interval(secs => $2)`,
      [idHash, limits.idleSeconds, Math.min(TOUCH_EVERY_SECONDS, limits.idleSeconds / 2)],
    );
    const row = rows[0];
    if (!row) return undefined;
    if (row.touch) await this.db.query('UPDATE web_sessions SET last_seen_at = now() WHERE id_hash = $1', [idHash]);
    return { org: normaliseOrg(row.org), subject: row.subject, token_id: row.token_id };
  }

  /** Ends a session for good. Idempotent; an unknown or malformed id is a no-op. */
  async revoke(id: string): Promise<void> {
    if (!SESSION_ID_RE.test(id)) return;
    await this.db.query('UPDATE web_sessions SET revoked_at = now() WHERE id_hash = $1 AND revoked_at IS NULL', [hashSessionId(id)]);
  }
}
