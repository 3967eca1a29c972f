import { optionalStr, secret, type Setting } from './env';

/** One run-event signing key: its id (sent in the `agentrun-key-id` header) and its secret bytes. */
export interface EventKey {
  kid: string;
  secret: Buffer;
}

/**
 * The key local mode signs and verifies with when AGENTRUN_EVENT_KEYS is unset. Everyone has it, so
 * it proves nothing: production mode refuses it, and a service that uses it says so at start.
 */
export const DEVELOPMENT_EVENT_KEY: EventKey = Object.freeze({ kid: 'dev', secret: Buffer.from('local-development-run-event-key-known-to-everyone') });

/** HMAC-SHA256 keys shorter than its output are guessable sooner than the hash is; production refuses them. */
export const EVENT_KEY_MIN_BYTES = 32;

const KEY_ID = /^[A-Za-z0-9._-]{1,64}$/;

/**
 * Reads `kid:secret,kid:secret`: every key a verifier accepts. The secret is everything after the
 * first colon, taken as bytes (UTF-8); `openssl rand -hex 32` gives a good one. Errors name key ids,
 * never secrets.
 */
export function parseEventKeys(text: string): EventKey[] {
  const keys: EventKey[] = [];
  for (const part of text.split(',').map((s) => s.trim()).filter(Boolean)) {
    const colon = part.indexOf(':');
    // Not echoed: an entry without a colon may be a secret pasted on its own.
    if (colon < 0) throw new Error('an entry has no colon (the form is kid:secret,kid:secret)');
    const kid = part.slice(0, colon);
    const value = part.slice(colon + 1);
    if (!KEY_ID.test(kid)) throw new Error(`a key id must be 1-64 of A-Z a-z 0-9 . _ - (the form is kid:secret,kid:secret), got '${kid.slice(0, 64)}'`);
    if (value === '') throw new Error(`key '${kid}' has no secret (the form is kid:secret,kid:secret)`);
    if (keys.some((k) => k.kid === kid)) throw new Error(`key id '${kid}' is listed twice`);
    keys.push({ kid, secret: Buffer.from(value, 'utf8') });
  }
  if (keys.length === 0) throw new Error('no key given (the form is kid:secret,kid:secret)');
  return keys;
}

function eventKeys(): Setting<EventKey[] | undefined> {
  const text = secret();
  return {
    read(env, key) {
      const value = text.read(env, key);
      if (value === undefined) return undefined;
      try {
        return parseEventKeys(value);
      } catch (err) {
        throw new Error(`${key}: ${(err as Error).message}`);
      }
    },
  };
}

/**
 * Run-event signing, read by the services that publish run events (the orchestrator's publish
 * activity) and the one that verifies them (the projector).
 */
export const eventSigningSpec = {
  /** Every key a verifier accepts, `kid:secret,...` (or AGENTRUN_EVENT_KEYS_FILE). Unset in local mode: the development key. */
  AGENTRUN_EVENT_KEYS: eventKeys(),
  /** The key the publisher signs with; the first of AGENTRUN_EVENT_KEYS when unset. */
  AGENTRUN_EVENT_KEY_ID: optionalStr(),
};

export interface EventKeyring {
  /** Every key a verifier accepts. */
  keys: EventKey[];
  /** The key a publisher signs with. */
  signing: EventKey;
  /** True when nothing was configured and the development key is in use (local mode only). */
  development: boolean;
}

interface EventKeySettings {
  AGENTRUN_EVENT_KEYS: EventKey[] | undefined;
  AGENTRUN_EVENT_KEY_ID: string | undefined;
}

/** The keys a service signs and verifies with; `eventKeyProblems` has already refused what this cannot resolve. */
export function eventKeyring(config: EventKeySettings): EventKeyring {
  const keys = config.AGENTRUN_EVENT_KEYS;
  if (!keys) return { keys: [DEVELOPMENT_EVENT_KEY], signing: DEVELOPMENT_EVENT_KEY, development: true };
  const signing = config.AGENTRUN_EVENT_KEY_ID === undefined ? keys[0] : keys.find((k) => k.kid === config.AGENTRUN_EVENT_KEY_ID);
  if (!signing) throw new Error(`AGENTRUN_EVENT_KEY_ID '${config.AGENTRUN_EVENT_KEY_ID}' is not among AGENTRUN_EVENT_KEYS`);
  return { keys, signing, development: false };
}

/**
 * What is wrong with a service's event keys, in either mode: a signing key id that names no key.
 * Production adds: keys must be set, none may be the development key or shorter than 32 bytes.
 * Looked at only when the service reads the group.
 */
export function eventKeyProblems(config: Record<string, unknown>): string[] {
  if (!('AGENTRUN_EVENT_KEYS' in config)) return [];
  // An orchestrator without the workflows role publishes no run events, so it needs no key (and is given none).
  if (config.ORCHESTRATOR_ROLES instanceof Set && !config.ORCHESTRATOR_ROLES.has('workflows')) return [];
  const keys = config.AGENTRUN_EVENT_KEYS as EventKey[] | undefined;
  const kid = config.AGENTRUN_EVENT_KEY_ID as string | undefined;
  const problems: string[] = [];
  if (kid !== undefined && !(keys ?? [DEVELOPMENT_EVENT_KEY]).some((k) => k.kid === kid)) {
    problems.push(`AGENTRUN_EVENT_KEY_ID is '${kid}', which names none of the keys in AGENTRUN_EVENT_KEYS; the publisher signs with that key, so it must be listed`);
  }
  if (config.AGENTRUN_MODE !== 'production') return problems;
  if (!keys) {
    problems.push(
      'AGENTRUN_EVENT_KEYS is not set; production mode needs the run-event signing keys (AGENTRUN_EVENT_KEYS or AGENTRUN_EVENT_KEYS_FILE, the form kid:secret,... with secrets of at least 32 bytes, e.g. from `openssl rand -hex 32`), the same list for the publishers (orchestrator, gpu-worker) and the projector',
    );
    return problems;
  }
  for (const key of keys) {
    if (key.secret.equals(DEVELOPMENT_EVENT_KEY.secret)) problems.push(`AGENTRUN_EVENT_KEYS: key '${key.kid}' is the development key; production mode needs a secret of its own`);
    else if (key.secret.length < EVENT_KEY_MIN_BYTES) problems.push(`AGENTRUN_EVENT_KEYS: key '${key.kid}' is ${key.secret.length} bytes; production mode needs at least ${EVENT_KEY_MIN_BYTES} (e.g. \`openssl rand -hex 32\`)`);
  }
  return problems;
}
