import { createHash, createHmac, randomBytes } from 'node:crypto';
import { normaliseOrg } from '@agentrun/contracts';
import type { DataSource } from 'typeorm';

/** Every command key starts with this, so one found in a log or a paste is recognisable. */
export const COMMAND_KEY_PREFIX = 'ark_';
/** A command key's id: `ck_` and 16 hex digits. */
export const COMMAND_KEY_ID_RE = /^ck_[0-9a-f]{16}$/;

/**
 * The key issued as `id` to `org`: HMAC-SHA256 under the server secret of the id and the org. Only
 * the server (the orchestrator and the token CLI) can compute it, so nothing stored in the database
 * signs a command, and changing a row's org does not hand its key to another org. The NUL separators
 * keep id and org apart (neither can contain one).
 */
export function deriveCommandKey(secret: string, id: string, org: string): string {
  const mac = createHmac('sha256', secret).update(`agentrun command key v1\0${id}\0${normaliseOrg(org)}`, 'utf8').digest('base64url');
  return COMMAND_KEY_PREFIX + mac;
}

/** SHA-256 of a key: stored at issue, shown (shortened) as its fingerprint. */
export function hashCommandKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

/** What `list` shows of a key: never the key. */
export interface CommandKeyInfo {
  id: string;
  org: string;
  /** The first 16 hex digits of SHA-256 of the key. */
  fingerprint: string;
  created_at: Date;
  revoked_at: Date | null;
}

/** What the verifier needs of a key id. */
export interface CommandKeyRecord {
  org: string;
  key_hash: string;
  revoked: boolean;
}

/**
 * Per-org command keys (the org credential a command on Kafka is signed with). A key is shown once, at
 * creation; the table keeps its id, org and hash. Orgs are stored lowercase (normaliseOrg).
 */
export class CommandKeyStore {
  constructor(private readonly db: DataSource) {}

  async create(org: string, secret: string): Promise<{ id: string; key: string; fingerprint: string }> {
    const id = `ck_${randomBytes(8).toString('hex')}`;
    const normalised = normaliseOrg(org);
    const key = deriveCommandKey(secret, id, normalised);
    const hash = hashCommandKey(key);
    await this.db.query('INSERT INTO command_keys (id, org, key_hash) VALUES ($1, $2, $3)', [id, normalised, hash]);
    return { id, key, fingerprint: hash.slice(0, 16) };
  }

  async list(org?: string): Promise<CommandKeyInfo[]> {
    const rows: (Omit<CommandKeyInfo, 'fingerprint'> & { key_hash: string })[] = await this.db.query(
      `SELECT id, org, key_hash, created_at, revoked_at FROM command_keys
       WHERE $1::text IS NULL OR org = $1 ORDER BY created_at, id`,
      [org === undefined ? null : normaliseOrg(org)],
    );
    return rows.map(({ key_hash, ...row }) => ({ ...row, fingerprint: key_hash.slice(0, 16) }));
  }

  /** Idempotent. Returns whether a live key was revoked by this call. */
  async revoke(id: string): Promise<boolean> {
    const [, changed] = (await this.db.query('UPDATE command_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL', [id])) as [unknown[], number];
    return changed > 0;
  }

  /** Whether a key with this id exists at all (revoked or not). */
  async exists(id: string): Promise<boolean> {
    return (await this.find(id)) !== undefined;
  }

  /** The key id's row, revoked or not; undefined when it was never issued. */
  async find(id: string): Promise<CommandKeyRecord | undefined> {
    if (!COMMAND_KEY_ID_RE.test(id)) return undefined;
    const rows: { org: string; key_hash: string; revoked_at: Date | null }[] = await this.db.query('SELECT org, key_hash, revoked_at FROM command_keys WHERE id = $1', [id]);
    const row = rows[0];
    return row && { org: normaliseOrg(row.org), key_hash: row.key_hash, revoked: row.revoked_at !== null };
  }
}
