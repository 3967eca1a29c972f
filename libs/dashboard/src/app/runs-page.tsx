import { AGENT_STATUSES, EVAL_STATUSES, isTerminal, RUN_STATUSES } from '@agentrun/contracts';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { errorText, getJson, type RunsPage as Page, type RunSummary } from './api';
import { NewRunForm } from './new-run';
import { runHref } from './router';
import { applyEvents, mergeRuns, progressOf, subjectOf } from './runs-list';
import { followRun } from './stream';
import { formatTime, Link, StatusBadge } from './ui';

const PAGE_SIZE = 25;
/** Active runs followed over SSE at once; the browser allows six connections to the gateway in all. */
const LIVE_STREAMS = 3;
const REFRESH_MS = 4_000;

interface Filters {
  status: string;
  kind: string;
  model: string;
}

function query(filters: Filters, extra: Record<string, string>): string {
  const params = new URLSearchParams();
  if (filters.status) params.set('status', filters.status);
  if (filters.kind) params.set('kind', filters.kind);
  if (filters.model.trim()) params.set('model', filters.model.trim());
  for (const [k, v] of Object.entries(extra)) params.set(k, v);
  return `/runs?${params.toString()}`;
}

export function RunsPage() {
  const [filters, setFilters] = useState<Filters>({ status: '', kind: '', model: '' });
  const [modelInput, setModelInput] = useState('');
  const [rows, setRows] = useState<RunSummary[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [loading, setLoading] = useState(false);
  const [loaded, setLoaded] = useState(false);
  const [error, setError] = useState<string>();
  const rowsRef = useRef(rows);
  rowsRef.current = rows;
  const generation = useRef(0);

  // A new filter starts the list again from the newest run.
  useEffect(() => {
    const mine = ++generation.current;
    setRows([]);
    setCursor(null);
    setLoaded(false);
    setError(undefined);
    setLoading(true);
    getJson<Page>(query(filters, { limit: String(PAGE_SIZE) }))
      .then((page) => {
        if (mine !== generation.current) return;
        setRows(page.runs);
        setCursor(page.next_cursor);
        setLoaded(true);
      })
      .catch((err: unknown) => mine === generation.current && setError(errorText(err)))
      .finally(() => mine === generation.current && setLoading(false));
  }, [filters]);

  // The model filter applies once typing pauses.
  useEffect(() => {
    const timer = window.setTimeout(() => setFilters((f) => (f.model === modelInput ? f : { ...f, model: modelInput })), 300);
    return () => window.clearTimeout(timer);
  }, [modelInput]);

  const loadMore = useCallback(() => {
    if (!cursor || loading) return;
    const mine = generation.current;
    setLoading(true);
    getJson<Page>(query(filters, { limit: String(PAGE_SIZE), cursor }))
      .then((page) => {
        if (mine !== generation.current) return;
        setRows((current) => mergeRuns(current, page.runs));
        setCursor(page.next_cursor);
      })
      .catch((err: unknown) => mine === generation.current && setError(errorText(err)))
      .finally(() => mine === generation.current && setLoading(false));
  }, [cursor, loading, filters]);

  // Infinite scroll: the sentinel under the table coming into view loads the next page.
  const sentinel = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const target = sentinel.current;
    if (!target || !cursor) return;
    const observer = new IntersectionObserver((entries) => entries.some((e) => e.isIntersecting) && loadMore(), { rootMargin: '200px' });
    observer.observe(target);
    return () => observer.disconnect();
  }, [cursor, loadMore]);

  // New runs, and statuses of runs not followed live, from the head of the list every few seconds.
  useEffect(() => {
    const mine = generation.current;
    const timer = window.setInterval(() => {
      if (document.hidden || !loaded) return;
      const limit = Math.min(200, Math.max(PAGE_SIZE, rowsRef.current.length));
      getJson<Page>(query(filters, { limit: String(limit) }))
        .then((page) => mine === generation.current && setRows((current) => mergeRuns(current, page.runs)))
        .catch(() => undefined);
    }, REFRESH_MS);
    return () => window.clearInterval(timer);
  }, [filters, loaded]);

  // Status badges that move as events arrive: the newest active runs are followed over SSE.
  const streams = useRef(new Map<string, () => void>());
  const activeIds = rows
    .filter((r) => !isTerminal(r.status))
    .slice(0, LIVE_STREAMS)
    .map((r) => r.run_id);
  const activeKey = activeIds.join('\n');
  useEffect(() => {
    const wanted = new Set(activeIds);
    for (const [id, stop] of streams.current) {
      if (!wanted.has(id)) {
        stop();
        streams.current.delete(id);
      }
    }
    for (const id of wanted) {
      if (streams.current.has(id)) continue;
      const stop = followRun(id, () => rowsRef.current.find((r) => r.run_id === id)?.last_seq ?? 0, {
        onEvents: (events) => setRows((current) => current.map((r) => (r.run_id === id ? applyEvents(r, events) : r))),
        onStatus: () => undefined,
      });
      streams.current.set(id, stop);
    }
  }, [activeKey]);
  useEffect(
    () => () => {
      for (const stop of streams.current.values()) stop();
      streams.current.clear();
    },
    [],
  );

  const statuses = filters.kind === 'agent' ? AGENT_STATUSES : filters.kind === 'eval' ? EVAL_STATUSES : RUN_STATUSES;

  return (
    <section aria-labelledby="runs-title">
      <h1 id="runs-title">Runs</h1>
      <NewRunForm />
      <form class="filters" aria-label="Filter runs" onSubmit={(e) => e.preventDefault()}>
        <div class="field">
          <label for="filter-status">Status</label>
          <select id="filter-status" name="status" value={filters.status} onChange={(e) => setFilters({ ...filters, status: e.currentTarget.value })}>
            <option value="">any</option>
            {statuses.map((s) => (
              <option key={s} value={s}>
                {s.replace(/_/g, ' ')}
              </option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="filter-kind">Kind</label>
          <select id="filter-kind" name="kind" value={filters.kind} onChange={(e) => setFilters({ ...filters, kind: e.currentTarget.value, status: '' })}>
            <option value="">both</option>
            <option value="agent">agent</option>
            <option value="eval">eval</option>
          </select>
        </div>
        <div class="field">
          <label for="filter-model">Model</label>
          <input id="filter-model" name="model" type="search" value={modelInput} placeholder="exact model name" onInput={(e) => setModelInput(e.currentTarget.value)} />
        </div>
      </form>
      <div role="alert" class="outcome">
        {error && <p class="error">{error}</p>}
      </div>
      <table class="runs" aria-busy={loading} aria-describedby="runs-count">
        <caption id="runs-count" class="visually-hidden">
          {`${rows.length} runs shown, newest first${cursor ? '; more load as you scroll' : ''}`}
        </caption>
        <thead>
          <tr>
            <th scope="col">Run</th>
            <th scope="col">Kind</th>
            <th scope="col">Status</th>
            <th scope="col">Goal or model</th>
            <th scope="col">Progress</th>
            <th scope="col">Created</th>
            <th scope="col">Updated</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((run) => (
            <tr key={run.run_id} data-run-id={run.run_id}>
              <th scope="row">
                <Link href={runHref(run.run_id)}>{run.run_id}</Link>
              </th>
              <td>{run.kind}</td>
              <td>
                <StatusBadge status={run.status} />
              </td>
              <td class="subject">{subjectOf(run)}</td>
              <td class="nowrap">{progressOf(run)}</td>
              <td class="nowrap">{formatTime(run.created_at)}</td>
              <td class="nowrap">{formatTime(run.updated_at)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {loaded && rows.length === 0 && <p class="empty">No runs yet{filters.status || filters.kind || filters.model ? ' match these filters' : ''}.</p>}
      <div ref={sentinel} class="sentinel" />
      {cursor && (
        <button type="button" class="secondary" onClick={loadMore} disabled={loading}>
          {loading ? 'Loading…' : 'Load more runs'}
        </button>
      )}
      {loaded && !cursor && rows.length > 0 && <p class="end-of-list">That is every run.</p>}
    </section>
  );
}
