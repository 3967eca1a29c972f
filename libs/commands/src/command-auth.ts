import { COMMAND_KEY_ID_HEADER, COMMAND_SIGNATURE_HEADER, normaliseOrg } from '@agentrun/contracts';
import { RECORD_SIGNATURE_HEX, recordSignatureMatches } from '@agentrun/kafka';
import { COMMAND_KEY_ID_RE, deriveCommandKey, hashCommandKey } from '@agentrun/persistence';
import type { CommandKeyLookupPort } from './ports';

/** A Kafka record's headers, decoded as UTF-8; a name sent more than once has every value. */
export type CommandHeaders = Readonly<Record<string, string | readonly string[] | undefined>>;

/** Why a command was refused is for the orchestrator's log only; the sender is told only that its credential did not count. */
export type CommandAuthVerdict = { ok: true; keyId: string } | { ok: false; why: string };

/** The one value of a header, or why there is none to trust. */
function single(headers: CommandHeaders, name: string): { value: string } | { why: string } {
  const raw = headers[name];
  if (raw === undefined) return { why: `no ${name} header` };
  if (typeof raw !== 'string') {
    // Two values would leave which one counts to whoever reads them: neither does.
    if (raw.length !== 1) return { why: `${raw.length} ${name} headers` };
    return { value: raw[0] };
  }
  return { value: raw };
}

/**
 * Decides whether a command on Kafka comes from its org (production mode). The org's credential is a
 * command key (`npm run token -- command-key create`); the record carries the key's id and the HMAC of
 * its exact value bytes under the key. The key is never stored: it is derived again here from the
 * server secret and the key's id and org, so only a live key issued to the command's own org, under
 * the current secret, verifies.
 *
 * `required` is false in local mode: commands are then taken as they come (headers ignored), which is
 * what local mode already does with the X-Org header over HTTP.
 */
export class CommandAuthenticator {
  constructor(
    readonly required: boolean,
    private readonly keys: CommandKeyLookupPort,
    private readonly secret: string | undefined,
  ) {}

  /** What the orchestrator says at startup about commands on Kafka. */
  describe(): { level: 'log' | 'warn' | 'error'; message: string } {
    if (!this.required) {
      return { level: 'warn', message: `commands are not authenticated: local mode (${COMMAND_KEY_ID_HEADER} and ${COMMAND_SIGNATURE_HEADER} headers are ignored; any producer on the commands topic acts for any org)` };
    }
    if (this.secret === undefined) {
      return { level: 'error', message: 'AGENTRUN_COMMAND_KEY_SECRET is not set: no command key can verify, so every command on Kafka is rejected as unauthorized (HTTP commands are unaffected)' };
    }
    return { level: 'log', message: `commands on Kafka must be signed with a command key of their org (${COMMAND_KEY_ID_HEADER}, ${COMMAND_SIGNATURE_HEADER})` };
  }

  /**
   * Whether `value` (the record's bytes) is signed by a live key of `org`. Throws only when the key
   * table is out of reach. Always ok when not required.
   */
  async verify(value: Buffer, headers: CommandHeaders, org: string): Promise<CommandAuthVerdict> {
    if (!this.required) return { ok: true, keyId: '' };
    const keyId = single(headers, COMMAND_KEY_ID_HEADER);
    if ('why' in keyId) return { ok: false, why: keyId.why };
    const signature = single(headers, COMMAND_SIGNATURE_HEADER);
    if ('why' in signature) return { ok: false, why: signature.why };
    const given = signature.value.trim().toLowerCase();
    if (!RECORD_SIGNATURE_HEX.test(given)) return { ok: false, why: `${COMMAND_SIGNATURE_HEADER} is not 64 hex digits` };
    if (!COMMAND_KEY_ID_RE.test(keyId.value)) return { ok: false, why: `${COMMAND_KEY_ID_HEADER} is not a command key id` };
    if (this.secret === undefined) return { ok: false, why: 'AGENTRUN_COMMAND_KEY_SECRET is not set' };
    const id = keyId.value;
    const key = await this.keys.find(id);
    if (!key) return { ok: false, why: `command key ${id} was never issued` };
    if (key.revoked) return { ok: false, why: `command key ${id} is revoked` };
    const commandOrg = normaliseOrg(org);
    if (key.org !== commandOrg) return { ok: false, why: `command key ${id} belongs to org ${key.org}, not ${commandOrg}` };
    const derived = deriveCommandKey(this.secret, id, key.org);
    if (hashCommandKey(derived) !== key.key_hash) {
      return { ok: false, why: `command key ${id} was issued under another AGENTRUN_COMMAND_KEY_SECRET (or its row was altered): issue a new key` };
    }
    if (!recordSignatureMatches(derived, value, given)) return { ok: false, why: `signature does not match the value under command key ${id}` };
    return { ok: true, keyId: id };
  }
}
