import { signal } from '@preact/signals';

/** The dashboard's own pages live under this path of the gateway; everything else is the API. */
export const BASE = '/ui';

export const location = signal({ path: window.location.pathname, search: window.location.search });

export type Route = { page: 'runs' } | { page: 'run'; runId: string } | { page: 'datasets' } | { page: 'missing' };

export function routeOf(path: string): Route {
  if (path === BASE || path === `${BASE}/`) return { page: 'runs' };
  if (path === `${BASE}/datasets` || path === `${BASE}/datasets/`) return { page: 'datasets' };
  const m = /^\/ui\/runs\/([^/]+)\/?$/.exec(path);
  if (m) {
    try {
      return { page: 'run', runId: decodeURIComponent(m[1]) };
    } catch {
      return { page: 'missing' };
    }
  }
  return { page: 'missing' };
}

export const runHref = (runId: string): string => `${BASE}/runs/${encodeURIComponent(runId)}`;
export const runsHref = `${BASE}/`;
export const datasetsHref = `${BASE}/datasets`;

/** True when this page was opened by starting its run here: a 404 then means "not projected yet". */
export function justStarted(): boolean {
  const state = window.history.state as { started?: unknown } | null;
  return state?.started === true;
}

/** `state` rides in the history entry, e.g. that the page was opened right after starting its run. */
export function navigate(href: string, state: Record<string, unknown> | null = null): void {
  window.history.pushState(state, '', href);
  location.value = { path: window.location.pathname, search: window.location.search };
  window.scrollTo(0, 0);
}

window.addEventListener('popstate', () => {
  location.value = { path: window.location.pathname, search: window.location.search };
});

/** A same-document link for plain clicks; a modified click (new tab, download) is the browser's. */
export function followLink(event: MouseEvent, href: string): void {
  if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  event.preventDefault();
  navigate(href);
}
