import { useEffect, useState } from 'preact/hooks';
import { credentialHeaders, rememberOrg, session } from './session';

/** An RFC 9457 problem the gateway answered with, kept whole so its `detail` can be shown as is. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly title: string,
    readonly detail: string,
    readonly reason?: string,
  ) {
    super(detail);
    this.name = 'ApiError';
  }
}

async function problemOf(res: Response): Promise<ApiError> {
  const text = await res.text().catch(() => '');
  try {
    const body = JSON.parse(text) as { title?: unknown; detail?: unknown; reason?: unknown };
    return new ApiError(
      res.status,
      typeof body.title === 'string' ? body.title : res.statusText,
      typeof body.detail === 'string' ? body.detail : text || res.statusText,
      typeof body.reason === 'string' ? body.reason : undefined,
    );
  } catch {
    return new ApiError(res.status, res.statusText || 'error', text || `HTTP ${res.status}`);
  }
}

/** The gateway refused who we are: back to the sign-in form, saying why. */
function signedOut(error: ApiError): void {
  if (session.value.kind === 'org') rememberOrg(undefined);
  session.value = { kind: 'signed-out', message: error.detail };
}

function newKey(): string {
  return typeof crypto.randomUUID === 'function' ? crypto.randomUUID() : `${Date.now()}-${Math.random().toString(36).slice(2)}`;
}

/**
 * A raw call: same origin, the session cookie, X-Org in local mode; a problem answer is thrown. The body
 * goes as JSON, or as it is (a file, say) when `contentType` names what it is.
 */
export async function call(
  method: string,
  path: string,
  body?: unknown,
  init: { signal?: AbortSignal; accept?: string; allow401?: boolean; contentType?: string } = {},
): Promise<Response> {
  const headers: Record<string, string> = { Accept: init.accept ?? 'application/json', ...credentialHeaders() };
  // One key per user action: a retried request is the same command, never a second one.
  if (method === 'POST') headers['Idempotency-Key'] = newKey();
  if (body !== undefined) headers['Content-Type'] = init.contentType ?? 'application/json';
  const res = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : init.contentType ? (body as BodyInit) : JSON.stringify(body),
    credentials: 'same-origin',
    cache: 'no-store',
    signal: init.signal,
  });
  if (res.ok) return res;
  const error = await problemOf(res);
  if (res.status === 401 && !init.allow401) signedOut(error);
  throw error;
}

export async function getJson<T>(path: string, signal?: AbortSignal): Promise<T> {
  return (await call('GET', path, undefined, { signal })).json() as Promise<T>;
}

export async function postJson<T>(path: string, body: unknown = {}): Promise<T> {
  const res = await call('POST', path, body);
  return (res.status === 204 ? undefined : await res.json()) as T;
}

/**
 * Fetches `path` with this page's credentials and hands it to the browser as a download named
 * `fileName`: a plain link would not carry X-Org in local mode.
 */
export async function saveDownload(path: string, fileName: string, accept: string): Promise<void> {
  const res = await call('GET', path, undefined, { accept });
  const url = URL.createObjectURL(await res.blob());
  const a = document.createElement('a');
  a.href = url;
  a.download = fileName;
  document.body.append(a);
  a.click();
  a.remove();
  window.setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

export function errorText(err: unknown): string {
  if (err instanceof ApiError) return err.detail;
  if (err instanceof Error) return err.message;
  return String(err);
}

/** What the gateway answers with: declared once in the contracts, shared with the gateway. */
export type { CommandAccepted as Accepted, RunSummary, RunsPage } from '@agentrun/contracts';

export const runPath = (runId: string, rest = ''): string => `/runs/${encodeURIComponent(runId)}${rest}`;

/** Who the session cookie speaks for, as GET /session says; undefined when it does not answer. */
async function whoAmI(): Promise<{ org: string; subject: string | null } | undefined> {
  const res = await fetch('/session', { headers: { Accept: 'application/json' }, credentials: 'same-origin', cache: 'no-store' }).catch(() => undefined);
  if (!res?.ok) return undefined;
  const body = (await res.json().catch(() => undefined)) as { org?: unknown; subject?: unknown } | undefined;
  return typeof body?.org === 'string' ? { org: body.org, subject: typeof body.subject === 'string' ? body.subject : null } : undefined;
}

/** Trades a token for the HttpOnly session cookie; the token is not kept by the page. */
export async function signInWithToken(token: string): Promise<void> {
  await call('POST', '/session', { token }, { allow401: true });
  rememberOrg(undefined);
  session.value = { kind: 'token', ...(await whoAmI()) };
}

/** Local mode without a token: checks the gateway takes X-Org for this org before using it. */
export async function signInWithOrg(org: string): Promise<void> {
  const res = await fetch('/runs?limit=1', { headers: { Accept: 'application/json', 'X-Org': org }, credentials: 'omit', cache: 'no-store' });
  if (!res.ok) throw await problemOf(res);
  // A session cookie would win over X-Org on every request: drop it, the org was chosen instead.
  await fetch('/session', { method: 'DELETE', credentials: 'same-origin' }).catch(() => undefined);
  rememberOrg(org);
  session.value = { kind: 'org', org };
}

export async function signOut(): Promise<void> {
  rememberOrg(undefined);
  await fetch('/session', { method: 'DELETE', credentials: 'same-origin' }).catch(() => undefined);
  session.value = { kind: 'signed-out' };
}

/** On load: a remembered org (local mode), else whatever cookie the browser holds. */
export async function checkSession(org: string | undefined): Promise<void> {
  if (org) {
    try {
      await signInWithOrg(org);
      return;
    } catch {
      rememberOrg(undefined);
    }
  }
  const who = await whoAmI();
  session.value = who ? { kind: 'token', ...who } : { kind: 'signed-out' };
}

/**
 * A GET read again whenever `deps` change: the newest body (kept while the next read is out) and the
 * newest failure's text (cleared by the next success). A read overtaken by the next is dropped.
 */
export function useJson<T>(path: string, deps: unknown[]): { body: T | undefined; error: string | undefined } {
  const [body, setBody] = useState<T>();
  const [error, setError] = useState<string>();
  useEffect(() => {
    const abort = new AbortController();
    getJson<T>(path, abort.signal)
      .then((read) => {
        setBody(read);
        setError(undefined);
      })
      .catch((err: unknown) => {
        if (!abort.signal.aborted) setError(errorText(err));
      });
    return () => abort.abort();
  }, [path, ...deps]);
  return { body, error };
}
