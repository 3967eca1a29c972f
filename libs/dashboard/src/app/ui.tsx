import type { ComponentChildren } from 'preact';
import { ApiError } from './api';
import { followLink } from './router';

export function StatusBadge({ status }: { status: string | undefined }) {
  const value = status ?? 'unknown';
  return (
    <span class={`badge status-${value}`} data-status={value}>
      {value.replace(/_/g, ' ')}
    </span>
  );
}

export function Link({ href, children, ...rest }: { href: string; children: ComponentChildren; class?: string; 'aria-label'?: string }) {
  return (
    <a href={href} onClick={(e) => followLink(e, href)} {...rest}>
      {children}
    </a>
  );
}

/** What a control's last use came to: a success is announced politely, an error at once. */
export type Outcome = { ok: true; text: string; link?: { href: string; label: string } } | { ok: false; text: string; title?: string; status?: number };

/** A failed request as an outcome: the gateway's problem (status, title, detail) when it answered with one. */
export function failureOf(err: unknown): Outcome {
  return err instanceof ApiError ? { ok: false, text: err.detail, title: err.title, status: err.status } : { ok: false, text: err instanceof Error ? err.message : String(err) };
}

export function OutcomeLine({ outcome, testId }: { outcome: Outcome | undefined; testId: string }) {
  // Two regions that stay in the page, so the one that fills in is announced: politely, or at once.
  return (
    <div class="outcome" data-testid={testId}>
      <div role="status">
        {outcome?.ok === true && (
          <p class="ok">
            {outcome.text}
            {outcome.link && (
              <>
                {' '}
                <Link href={outcome.link.href}>{outcome.link.label}</Link>
              </>
            )}
          </p>
        )}
      </div>
      <div role="alert">
        {outcome?.ok === false && (
          <p class="error">
            {outcome.status ? <strong>{`${outcome.status} ${outcome.title ?? 'error'}: `}</strong> : null}
            <span class="detail">{outcome.text}</span>
          </p>
        )}
      </div>
    </div>
  );
}

/** A table's head row: one column header per name, in order. */
export function ColumnHeads({ names }: { names: readonly string[] }) {
  return (
    <thead>
      <tr>
        {names.map((name) => (
          <th key={name} scope="col">
            {name}
          </th>
        ))}
      </tr>
    </thead>
  );
}

export function formatTime(iso: string | undefined): string {
  if (!iso) return '';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString(undefined, { hour12: false });
}

export function clockTime(iso: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const pad = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}
