import { ConfigError } from './env';
import { DEVELOPMENT_EVENT_KEY, eventKeyProblems, eventKeyring, eventSigningSpec, parseEventKeys } from './event-keys';
import { modeSpec } from './platform';
import { loadServiceConfig } from './production';

const spec = { ...modeSpec, ...eventSigningSpec };
const strong = (c: string) => c.repeat(64);

describe('run-event signing keys', () => {
  it('parses kid:secret lists, the secret being everything after the first colon', () => {
    expect(parseEventKeys(' k1:abc:def , k2:xyz ')).toEqual([
      { kid: 'k1', secret: Buffer.from('abc:def') },
      { kid: 'k2', secret: Buffer.from('xyz') },
    ]);
    expect(() => parseEventKeys('')).toThrow(/no key/);
    expect(() => parseEventKeys('k1:')).toThrow(/'k1' has no secret/);
    expect(() => parseEventKeys('k1:a,k1:b')).toThrow(/listed twice/);
    expect(() => parseEventKeys('bad id:topsecret')).toThrow(/key id must be/);
    expect(() => parseEventKeys('topsecret')).toThrow(/has no colon/);
    for (const text of ['bad id:topsecret', 'topsecret', 'k:topsecret,k:topsecret']) {
      expect(() => parseEventKeys(text)).toThrow(expect.objectContaining({ message: expect.not.stringContaining('topsecret') }));
    }
  });

  it('local mode without keys signs and verifies with the development key, and says so', () => {
    const config = loadServiceConfig(spec, {});
    expect(eventKeyring(config)).toEqual({ keys: [DEVELOPMENT_EVENT_KEY], signing: DEVELOPMENT_EVENT_KEY, development: true });
  });

  it('signs with AGENTRUN_EVENT_KEY_ID (the first key by default) and verifies with every key', () => {
    const env = { AGENTRUN_EVENT_KEYS: `new:${strong('n')},old:${strong('o')}` };
    expect(eventKeyring(loadServiceConfig(spec, env)).signing.kid).toBe('new');
    const rotating = eventKeyring(loadServiceConfig(spec, { ...env, AGENTRUN_EVENT_KEY_ID: 'old' }));
    expect(rotating.signing.kid).toBe('old');
    expect(rotating.keys.map((k) => k.kid)).toEqual(['new', 'old']);
    expect(rotating.development).toBe(false);
  });

  it('refuses a signing key id that names no key, in either mode', () => {
    expect(() => loadServiceConfig(spec, { AGENTRUN_EVENT_KEYS: `a:${strong('a')}`, AGENTRUN_EVENT_KEY_ID: 'b' })).toThrow(/AGENTRUN_EVENT_KEY_ID is 'b', which names none/);
    expect(() => loadServiceConfig(spec, { AGENTRUN_EVENT_KEYS: 'a b:c' })).toThrow(/AGENTRUN_EVENT_KEYS: a key id must be/);
  });

  it('production needs keys of its own, each of at least 32 bytes, and names the key, never the secret', () => {
    const production = (env: Record<string, string>) => () => loadServiceConfig(spec, { AGENTRUN_MODE: 'production', ...env });
    expect(production({})).toThrow(/AGENTRUN_EVENT_KEYS is not set; production mode needs the run-event signing keys/);
    expect(production({ AGENTRUN_EVENT_KEYS: `dev:${DEVELOPMENT_EVENT_KEY.secret.toString()}` })).toThrow(/key 'dev' is the development key/);
    let error: ConfigError | undefined;
    try {
      production({ AGENTRUN_EVENT_KEYS: `ok:${strong('x')},short:tooshortsecret` })();
    } catch (err) {
      error = err as ConfigError;
    }
    expect(error?.problems).toEqual(["AGENTRUN_EVENT_KEYS: key 'short' is 14 bytes; production mode needs at least 32 (e.g. `openssl rand -hex 32`)"]);
    expect(error?.message).not.toContain('tooshortsecret');
    expect(production({ AGENTRUN_EVENT_KEYS: `ok:${strong('x')}` })).not.toThrow();
  });

  it('looks only at services that read the keys', () => {
    expect(eventKeyProblems({ AGENTRUN_MODE: 'production' })).toEqual([]);
  });
});
