import { COMMAND_KEY_ID_HEADER, COMMAND_SIGNATURE_HEADER } from '@agentrun/contracts';
import { signRecordValue } from '@agentrun/kafka';
import { deriveCommandKey, hashCommandKey } from '@agentrun/persistence';
import { CommandAuthenticator } from './command-auth';
import type { CommandKeyLookupPort, CommandKeyView } from './ports';
import { commandOf, serviceWithFakes } from './testing/service-with-fakes';

const SECRET = 'unit-test-command-key-secret-0123456789abcdef';
const KID = 'ck_0123456789abcdef';

/** The key table as the CLI leaves it: the id, its org and the hash of the key derived under SECRET. */
class KeyTable implements CommandKeyLookupPort {
  readonly rows = new Map<string, CommandKeyView>();
  lookups = 0;
  issue(id: string, org: string, secret = SECRET): string {
    const key = deriveCommandKey(secret, id, org);
    this.rows.set(id, { org, key_hash: hashCommandKey(key), revoked: false });
    return key;
  }
  async find(id: string): Promise<CommandKeyView | undefined> {
    this.lookups += 1;
    return this.rows.get(id);
  }
}

const value = Buffer.from(JSON.stringify({ command_id: 'c1', type: 'agent.pause', org: 'acme', run_id: 'r1', payload: {} }));
const signed = (key: string, bytes: Buffer = value, id = KID) => ({ [COMMAND_KEY_ID_HEADER]: id, [COMMAND_SIGNATURE_HEADER]: signRecordValue(key, bytes) });

describe('command key derivation', () => {
  it('is fixed by secret, id and org, and differs when any of them does', () => {
    const key = deriveCommandKey(SECRET, KID, 'acme');
    expect(key).toMatch(/^ark_[A-Za-z0-9_-]{43}$/);
    expect(deriveCommandKey(SECRET, KID, 'acme')).toBe(key);
    // The org is normalised before it is bound in: a key issued for Acme is acme's.
    expect(deriveCommandKey(SECRET, KID, 'ACME')).toBe(key);
    expect(deriveCommandKey(SECRET, KID, 'acme2')).not.toBe(key);
    expect(deriveCommandKey(SECRET, 'ck_0123456789abcdee', 'acme')).not.toBe(key);
    expect(deriveCommandKey(SECRET + 'x', KID, 'acme')).not.toBe(key);
  });

  it('signs the exact bytes as openssl dgst -sha256 -hmac KEY does: lowercase hex', () => {
    // What the README's line prints: printf %s '{"a":1}' | openssl dgst -sha256 -hmac 'ark_x-y_Z' -r | cut -d' ' -f1
    expect(signRecordValue('ark_x-y_Z', '{"a":1}')).toBe('a0ef752b313bb3da974e6d7b143abd3d011a822ce3e1786f9f106b37131724cb');
    expect(signRecordValue('key', Buffer.from('{}'))).toBe('a777724d943eb48dc69bca8a4a6d57a04db3f9ec7e1de4e581e860265bdf3032');
    expect(signRecordValue('key', '{} ')).not.toBe(signRecordValue('key', '{}'));
  });
});

describe('CommandAuthenticator', () => {
  it('accepts a value signed with a live key of the command\'s org, whatever case the command spells the org in', async () => {
    const keys = new KeyTable();
    const key = keys.issue(KID, 'acme');
    const auth = new CommandAuthenticator(true, keys, SECRET);
    expect(await auth.verify(value, signed(key), 'acme')).toEqual({ ok: true, keyId: KID });
    expect(await auth.verify(value, signed(key), 'ACME')).toEqual({ ok: true, keyId: KID });
    // Uppercase hex, as some tools print it, is the same signature.
    expect(await auth.verify(value, { ...signed(key), [COMMAND_SIGNATURE_HEADER]: signRecordValue(key, value).toUpperCase() }, 'acme')).toMatchObject({ ok: true });
  });

  it.each([
    ['no headers at all', {}, /no agentrun-key-id header/],
    ['a key id and no signature', { [COMMAND_KEY_ID_HEADER]: KID }, /no agentrun-signature header/],
    ['a signature that is not hex', { [COMMAND_KEY_ID_HEADER]: KID, [COMMAND_SIGNATURE_HEADER]: 'z'.repeat(64) }, /not 64 hex digits/],
    ['a key id of another shape', { [COMMAND_KEY_ID_HEADER]: "ck_' OR 1=1 --", [COMMAND_SIGNATURE_HEADER]: 'a'.repeat(64) }, /not a command key id/],
    ['two key ids', { [COMMAND_KEY_ID_HEADER]: [KID, KID], [COMMAND_SIGNATURE_HEADER]: 'a'.repeat(64) }, /2 agentrun-key-id headers/],
  ])('refuses %s without asking the key table', async (_what, headers, why) => {
    const keys = new KeyTable();
    keys.issue(KID, 'acme');
    const verdict = await new CommandAuthenticator(true, keys, SECRET).verify(value, headers, 'acme');
    expect(verdict).toEqual({ ok: false, why: expect.stringMatching(why) });
    expect(keys.lookups).toBe(0);
  });

  it('refuses an unknown key, a revoked key, another org\'s key, a changed value and a key issued under another secret', async () => {
    const keys = new KeyTable();
    const key = keys.issue(KID, 'acme');
    const other = keys.issue('ck_1111111111111111', 'globex');
    const auth = new CommandAuthenticator(true, keys, SECRET);
    const verify = (headers: Record<string, string>, org = 'acme', bytes = value) => auth.verify(bytes, headers, org);

    expect(await verify(signed(key, value, 'ck_2222222222222222'))).toEqual({ ok: false, why: 'command key ck_2222222222222222 was never issued' });
    // globex's own key, signing a command that names acme.
    expect(await verify(signed(other, value, 'ck_1111111111111111'))).toEqual({ ok: false, why: expect.stringMatching(/belongs to org globex, not acme/) });
    // acme's key id with a signature made by anything other than acme's key.
    expect(await verify({ ...signed(other), [COMMAND_KEY_ID_HEADER]: KID })).toEqual({ ok: false, why: expect.stringMatching(/signature does not match/) });
    // Signed, then changed on the way (one byte of whitespace).
    expect(await verify(signed(key), 'acme', Buffer.concat([value, Buffer.from(' ')]))).toEqual({ ok: false, why: expect.stringMatching(/signature does not match/) });
    // Issued before the secret was rotated: the row is there, the key no longer derives from it.
    const old = keys.issue('ck_3333333333333333', 'acme', 'the-secret-before-rotation-0123456789');
    expect(await verify(signed(old, value, 'ck_3333333333333333'))).toEqual({ ok: false, why: expect.stringMatching(/another AGENTRUN_COMMAND_KEY_SECRET/) });
    // A database writer who moves acme's key row to globex gains nothing: the key is bound to its org.
    keys.rows.set('ck_1111111111111111', { ...keys.rows.get('ck_1111111111111111')!, org: 'acme' });
    expect(await verify(signed(other, value, 'ck_1111111111111111'))).toMatchObject({ ok: false });

    keys.rows.set(KID, { ...keys.rows.get(KID)!, revoked: true });
    expect(await verify(signed(key))).toEqual({ ok: false, why: `command key ${KID} is revoked` });
  });

  it('refuses everything in production mode without a server secret, and takes everything in local mode', async () => {
    const keys = new KeyTable();
    const key = keys.issue(KID, 'acme');
    expect(await new CommandAuthenticator(true, keys, undefined).verify(value, signed(key), 'acme')).toEqual({ ok: false, why: 'AGENTRUN_COMMAND_KEY_SECRET is not set' });
    expect(new CommandAuthenticator(true, keys, undefined).describe().level).toBe('error');

    const local = new CommandAuthenticator(false, keys, undefined);
    expect(await local.verify(value, {}, 'acme')).toMatchObject({ ok: true });
    expect(local.describe()).toEqual({ level: 'warn', message: expect.stringMatching(/^commands are not authenticated: local mode/) });
    expect(keys.lookups).toBe(0);
  });

  it('lets a lookup failure through, so the consumer retries instead of refusing on a guess', async () => {
    const keys: CommandKeyLookupPort = { find: () => Promise.reject(new Error('connection refused')) };
    await expect(new CommandAuthenticator(true, keys, SECRET).verify(value, signed('k'), 'acme')).rejects.toThrow('connection refused');
  });
});

describe('CommandService.refuseUnauthorized', () => {
  it('publishes rejected / unauthorized naming no run state, and leaves the ledger and the run alone', async () => {
    const { service, ledger, runs, outcomes } = serviceWithFakes();
    const command = commandOf('agent.pause', {}, { run_id: 'someone-elses' });

    const refused = await service.refuseUnauthorized(command);

    expect(refused).toMatchObject({ command_id: command.command_id, org: 'acme', run_id: 'someone-elses', type: 'agent.pause', outcome: 'rejected', reason: 'unauthorized' });
    expect(refused.message).toMatch(/no valid command key signature/);
    expect(outcomes.published).toEqual([refused]);
    expect(ledger.entries.size).toBe(0);
    expect(runs.started()).toHaveLength(0);

    // The command id is not burnt: the same command, properly signed later, is decided as new.
    runs.add('acme', 'someone-elses', { kind: 'agent', status: 'running' });
    expect(await service.handle(command)).toMatchObject({ outcome: 'accepted' });
  });
});
