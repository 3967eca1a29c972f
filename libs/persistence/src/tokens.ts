import { createHash, randomBytes } from 'node:crypto';
import type { DataSource } from 'typeorm';

/** What `list` shows of a token: never the token, never its hash. */
export interface TokenInfo {
  id: string;
  org: string;
  label: string | null;
  created_at: Date;
  revoked_at: Date | null;
}

/** Every token starts with this, so one found in a log or a paste is recognisable. */
export const TOKEN_PREFIX = 'ar_';

export function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/** API tokens, each naming one org. The token is shown once, at creation; only its hash is kept. */
export class TokenStore {
  constructor(private readonly db: DataSource) {}

  async create(org: string, label?: string): Promise<{ id: string; token: string }> {
    const id = `tok_${randomBytes(8).toString('hex')}`;
    const token = TOKEN_PREFIX + randomBytes(32).toString('base64url');
    await this.db.query('INSERT INTO api_tokens (id, org, token_hash, label) VALUES ($1, $2, $3, $4)', [id, org, hashToken(token), label ?? null]);
    return { id, token };
  }

  async list(org?: string): Promise<TokenInfo[]> {
    return this.db.query(
      `SELECT id, org, label, created_at, revoked_at FROM api_tokens
       WHERE $1::text IS NULL OR org = $1 ORDER BY created_at, id`,
      [org ?? null],
    );
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
    if (!token.startsWith(TOKEN_PREFIX) || token.length > 200) return undefined;
    const rows: { org: string }[] = await this.db.query('SELECT org FROM api_tokens WHERE token_hash = $1 AND revoked_at IS NULL', [hashToken(token)]);
    return rows[0]?.org;
  }
}
