import { CASE_ERROR_TYPES } from '@agentrun/contracts';
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { errorText, getJson, saveDownload } from './api';
import {
  CASE_OUTCOMES,
  durationText,
  isFiltered,
  NO_FILTERS,
  refreshLimit,
  resultsPath,
  scorersSeen,
  scoreText,
  tokensText,
  type CaseFilters,
  type CaseResultRow,
} from './eval-view';
import { ColumnHeads, failureOf, formatTime, OutcomeLine, type Outcome } from './ui';

const PAGE_SIZE = 50;

interface ResultsPage {
  cases: CaseResultRow[];
  next_after: string | null;
}

/**
 * An eval run's finished cases (GET /runs/{id}/results), filtered and paged by case id; a row opens the
 * case in a drawer. `finished` is how many cases the run has finished: when it moves, the rows shown are
 * asked for again, so a running eval's table fills in.
 */
export function CaseResults({ runId, finished }: { runId: string; finished: number }) {
  const [filters, setFilters] = useState<CaseFilters>(NO_FILTERS);
  const [rows, setRows] = useState<CaseResultRow[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [scorers, setScorers] = useState<string[]>([]);
  const [loading, setLoading] = useState(false);
  const [loaded, setLoaded] = useState(false);
  const [error, setError] = useState<string>();
  const [open, setOpen] = useState<CaseResultRow>();
  const [exported, setExported] = useState<Outcome>();
  const generation = useRef(0);
  const shown = useRef(0);
  shown.current = rows.length;
  const lastFilters = useRef(filters);

  // From the first case again when the filters change; the same span again when more cases finish.
  useEffect(() => {
    const mine = ++generation.current;
    const refilter = lastFilters.current !== filters;
    lastFilters.current = filters;
    if (refilter) {
      setRows([]);
      setCursor(null);
      setLoaded(false);
    }
    setLoading(true);
    const limit = refilter ? PAGE_SIZE : refreshLimit(shown.current, PAGE_SIZE);
    getJson<ResultsPage>(resultsPath(runId, filters, { limit }))
      .then((page) => {
        if (mine !== generation.current) return;
        setRows(page.cases);
        setCursor(page.next_after);
        setScorers((known) => scorersSeen(known, page.cases));
        setLoaded(true);
        setError(undefined);
      })
      .catch((err: unknown) => mine === generation.current && setError(errorText(err)))
      .finally(() => mine === generation.current && setLoading(false));
  }, [runId, filters, finished]);

  const more = () => {
    if (!cursor) return;
    const mine = generation.current;
    setLoading(true);
    getJson<ResultsPage>(resultsPath(runId, filters, { after: cursor, limit: PAGE_SIZE }))
      .then((page) => {
        if (mine !== generation.current) return;
        setRows((current) => [...current, ...page.cases.filter((c) => !current.some((r) => r.case_id === c.case_id))]);
        setCursor(page.next_after);
        setScorers((known) => scorersSeen(known, page.cases));
      })
      .catch((err: unknown) => mine === generation.current && setError(errorText(err)))
      .finally(() => mine === generation.current && setLoading(false));
  };

  const exportPath = resultsPath(runId, filters, { format: 'jsonl' });
  const exportName = `${runId}-results.jsonl`;
  const set = (patch: Partial<CaseFilters>) => setFilters({ ...filters, ...patch });

  return (
    <section class="panel case-results" aria-labelledby="case-results-title">
      <h2 id="case-results-title">Case results</h2>
      <form class="filters" aria-label="Filter cases" onSubmit={(e) => e.preventDefault()}>
        <FilterSelect id="case-filter-status" label="Outcome" value={filters.status} choices={CASE_OUTCOMES} onChange={(status) => set({ status })} />
        <FilterSelect
          id="case-filter-scorer"
          label={
            <>
              Scorer <span class="hint">(scored below 1)</span>
            </>
          }
          value={filters.scorer}
          choices={scorers}
          onChange={(scorer) => set({ scorer })}
        />
        <FilterSelect
          id="case-filter-error"
          label="Error type"
          value={filters.error_type}
          choices={CASE_ERROR_TYPES}
          choiceText={(t) => t.replace(/_/g, ' ')}
          onChange={(error_type) => set({ error_type })}
        />
        <a
          class="export"
          href={exportPath}
          download={exportName}
          onClick={(e) => {
            if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
            e.preventDefault();
            setExported(undefined);
            saveDownload(exportPath, exportName, 'application/x-ndjson').then(
              () => setExported({ ok: true, text: `Exported ${exportName}` }),
              (err: unknown) => setExported(failureOf(err)),
            );
          }}
        >
          Export JSONL
        </a>
      </form>
      <OutcomeLine outcome={exported} testId="outcome-export" />
      {error && (
        <p class="error" role="alert">
          {`The cases could not be loaded: ${error}`}
        </p>
      )}
      {loaded && rows.length === 0 && <p class="muted">{!isFiltered(filters) ? 'No case has finished yet.' : 'No finished case matches these filters.'}</p>}
      {rows.length > 0 && (
        <table class="cases-table" aria-describedby="cases-table-hint">
          <ColumnHeads names={['Case', 'Outcome', 'Score', 'Error type', 'Attempts', 'Tokens', 'Duration']} />
          <tbody>
            {rows.map((row) => (
              <tr key={row.case_id} data-case-id={row.case_id} data-case-status={row.status} class="clickable" onClick={() => setOpen(row)}>
                <th scope="row">
                  <button type="button" class="link" aria-label={`Open case ${row.case_id}`} onClick={(e) => {
                      e.stopPropagation();
                      setOpen(row);
                    }}>
                    {row.case_id}
                  </button>
                </th>
                <td>
                  <span class={`badge case-badge case-${row.status}`}>{row.status}</span>
                </td>
                <td class="num">{scoreText(row.score)}</td>
                <td>{row.error_type?.replace(/_/g, ' ') ?? ''}</td>
                <td class="num">{row.attempts ?? '—'}</td>
                <td class="num">{tokensText(row.usage)}</td>
                <td class="num">{durationText(row.duration_ms)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <p id="cases-table-hint" class="hint">
        {`${rows.length} case${rows.length === 1 ? '' : 's'} shown${cursor ? ', more to load' : ''}. Open a case for its input, output and each score's explanation.`}
      </p>
      {cursor && (
        <button type="button" class="secondary" disabled={loading} onClick={more}>
          Show more cases
        </button>
      )}
      {open && <CaseDrawer row={open} onClose={() => setOpen(undefined)} />}
    </section>
  );
}

/** One filter of the case table: `any` (the empty value) or one of `choices`. */
function FilterSelect({
  id,
  label,
  value,
  choices,
  choiceText = (choice) => choice,
  onChange,
}: {
  id: string;
  label: ComponentChildren;
  value: string;
  choices: readonly string[];
  choiceText?: (choice: string) => string;
  onChange: (value: string) => void;
}) {
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <select id={id} value={value} onChange={(e) => onChange(e.currentTarget.value)}>
        <option value="">any</option>
        {choices.map((choice) => (
          <option key={choice} value={choice}>
            {choiceText(choice)}
          </option>
        ))}
      </select>
    </div>
  );
}

/** One case in full, in a modal drawer: Escape or Close shuts it and focus goes back to where it was. */
function CaseDrawer({ row, onClose }: { row: CaseResultRow; onClose: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const el = dialog.current;
    if (el && !el.open) el.showModal();
    return () => el?.close();
  }, []);
  const result = row.result;
  const titleId = 'case-drawer-title';
  return (
    <dialog ref={dialog} class="drawer" aria-labelledby={titleId} data-testid="case-drawer" data-case-id={row.case_id} onClose={onClose}>
      <header class="drawer-head">
        <h2 id={titleId}>{`Case ${row.case_id}`}</h2>
        <button type="button" class="secondary" onClick={() => dialog.current?.close()}>
          Close
        </button>
      </header>
      <dl class="facts">
        <div>
          <dt>Outcome</dt>
          <dd data-testid="drawer-status">{row.status}</dd>
        </div>
        <div>
          <dt>Score</dt>
          <dd data-testid="drawer-score">{scoreText(row.score)}</dd>
        </div>
        {row.error_type && (
          <div>
            <dt>Error type</dt>
            <dd>{row.error_type}</dd>
          </div>
        )}
        <div>
          <dt>Attempts</dt>
          <dd>{row.attempts ?? '—'}</dd>
        </div>
        <div>
          <dt>Usage</dt>
          <dd data-testid="drawer-usage">{tokensText(row.usage ?? result?.usage ?? null)}</dd>
        </div>
        <div>
          <dt>Duration</dt>
          <dd>{durationText(row.duration_ms ?? result?.duration_ms)}</dd>
        </div>
        <div>
          <dt>Finished</dt>
          <dd>{formatTime(row.finished_at)}</dd>
        </div>
      </dl>
      {!result ? (
        <p class="muted" data-testid="drawer-synthetic">
          A synthetic case: the solver made up its outcome and score, so there is no input, output or explanation to show.
        </p>
      ) : (
        <>
          {result.truncated && <p class="notice">Long texts were cut to fit the event; the export has them as recorded.</p>}
          <h3>Input</h3>
          <pre class="text" data-testid="drawer-input">
            {result.input}
          </pre>
          <h3>{result.target.length === 1 ? 'Target' : 'Targets'}</h3>
          <ul class="targets" data-testid="drawer-targets">
            {result.target.map((t, i) => (
              <li key={i}>
                <code>{t}</code>
              </li>
            ))}
          </ul>
          <h3>Output</h3>
          {result.output === null ? (
            <p class="muted" data-testid="drawer-output">
              No output: the solver did not get one.
            </p>
          ) : (
            <pre class="text" data-testid="drawer-output">
              {result.output}
            </pre>
          )}
          {result.error && (
            <>
              <h3>Error</h3>
              <pre class="text error" data-testid="drawer-error">
                {result.error}
              </pre>
            </>
          )}
          <h3>Scores</h3>
          {result.scores.length === 0 ? (
            <p class="muted">Not scored.</p>
          ) : (
            <table class="scores" data-testid="drawer-scores">
              <ColumnHeads names={['Scorer', 'Value', 'Explanation']} />
              <tbody>
                {result.scores.map((s) => (
                  <tr key={s.scorer} data-scorer={s.scorer}>
                    <th scope="row">{s.scorer}</th>
                    <td class="num">{scoreText(s.value)}</td>
                    <td class="explanation">{s.explanation}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </>
      )}
    </dialog>
  );
}
