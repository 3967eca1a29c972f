import { signal } from '@preact/signals';

/**
 * How this page is allowed in. `token`: the HttpOnly session cookie of POST /session, which the
 * page never sees; it works in both modes and for the event stream. Its org and subject (who the
 * token was made for: the one who approves evals) come from GET /session; `subject` null is a token
 * made without one, which cannot approve. `org`: local mode only, the org is sent as X-Org on every
 * request (the gateway refuses it in production), and an approval names its reviewer itself.
 */
export type Session =
  | { kind: 'checking' }
  | { kind: 'signed-out'; message?: string }
  | { kind: 'token'; org?: string; subject?: string | null }
  | { kind: 'org'; org: string };

export const session = signal<Session>({ kind: 'checking' });

const ORG_KEY = 'agentrun.dashboard.org';

export function storedOrg(): string | undefined {
  try {
    return localStorage.getItem(ORG_KEY) ?? undefined;
  } catch {
    return undefined;
  }
}

export function rememberOrg(org: string | undefined): void {
  try {
    if (org) localStorage.setItem(ORG_KEY, org);
    else localStorage.removeItem(ORG_KEY);
  } catch {
    // storage refused (private mode): the choice lasts until the page is closed
  }
}

/** The headers that name the caller, besides the cookie the browser adds by itself. */
export function credentialHeaders(): Record<string, string> {
  const current = session.value;
  return current.kind === 'org' ? { 'X-Org': current.org } : {};
}
