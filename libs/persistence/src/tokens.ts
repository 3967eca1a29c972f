import { createHash, randomBytes } from 'node:crypto';
import { normaliseOrg } from '@agentrun/contracts';
import type { DataSource } from 'typeorm';

/** What `list` shows of a token: never the token, never its hash. */
export interface TokenInfo {
  id: string;
  org: string;
  label: string | null;
  /** Who the token speaks for (a person or service), or null: such a token cannot approve. */
  subject: string | null;
  created_at: Date;
  revoked_at: Date | null;
}

/** Every token starts with this, so one found in a log or a paste is recognisable. */
export const TOKEN_PREFIX = 'ar_';

/** Who a live token speaks for: its id, its org (normalised) and its subject, if it has one. */
export interface TokenIdentity {
  id: string;
  org: string;
  subject: string | null;
}

export function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/**
 * API tokens, each naming one org and, optionally, a subject (who it speaks for). The token is shown once, at creation; only its hash is kept.
 * Orgs are stored and answered lowercase (normaliseOrg); rows written before that may hold capitals,
 * so reads normalise too rather than trusting the column.
 */
export class TokenStore {
  constructor(private readonly db: DataSource) {}

  async create(org: string, label?: string, subject?: string): Promise<{ id: string; token: string }> {
    const id = `tok_${randomBytes(8).toString('hex')}`;
    const token = TOKEN_PREFIX + randomBytes(32).toString('base64url');
    await this.db.query('INSERT INTO api_tokens (id, org, token_hash, label, subject) VALUES ($1, $2, $3, $4, $5)', [
      id,
      normaliseOrg(org),
      hashToken(token),
      label ?? null,
      subject ?? null,
    ]);
    return { id, token };
  }

  async list(org?: string): Promise<TokenInfo[]> {
    // lower() in SQL is ASCII-only for these orgs (ORG_PATTERN), so it agrees with normaliseOrg.
    const rows: TokenInfo[] = await this.db.query(
      `SELECT id, org, label, subject, created_at, revoked_at FROM api_tokens
       WHERE $1::text IS NULL OR lower(org) = $1 ORDER BY created_at, id`,
      [org === undefined ? null : normaliseOrg(org)],
    );
    return rows.map((row) => ({ ...row, org: normaliseOrg(row.org) }));
  }

  /** Idempotent. Returns whether a live token was revoked by this call. */
  async revoke(id: string): Promise<boolean> {
    const [, changed] = (await this.db.query('UPDATE api_tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL', [id])) as [unknown[], number];
    return changed > 0;
  }

  /** Whether a token with this id exists at all (revoked or not). */
  async exists(id: string): Promise<boolean> {
    const rows: unknown[] = await this.db.query('SELECT 1 FROM api_tokens WHERE id = $1', [id]);
    return rows.length > 0;
  }

  /** The org a live token names, or undefined for an unknown or revoked one. */
  async orgFor(token: string): Promise<string | undefined> {
    return (await this.identify(token))?.org;
  }

  /** Who a live token speaks for, or undefined for an unknown or revoked one. */
  async identify(token: string): Promise<TokenIdentity | undefined> {
    if (!token.startsWith(TOKEN_PREFIX) || token.length > 200) return undefined;
    const rows: TokenIdentity[] = await this.db.query('SELECT id, org, subject FROM api_tokens WHERE token_hash = $1 AND revoked_at IS NULL', [hashToken(token)]);
    return rows[0] && { id: rows[0].id, org: normaliseOrg(rows[0].org), subject: rows[0].subject };
  }
}
