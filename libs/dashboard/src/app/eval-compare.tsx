import { useEffect, useState } from 'preact/hooks';
import { errorText, getJson, runPath, type RunsPage } from './api';
import { changeCounts, comparableEvals, differenceText, scoreText, signedText, type EvalComparison } from './eval-view';
import { runHref } from './router';
import { ColumnHeads, failureOf, formatTime, Link, OutcomeLine, type Outcome } from './ui';

/** Eval runs looked through for ones over the same dataset: the newest this many (the most GET /runs gives at once). */
const CANDIDATES = 200;

/**
 * This eval against another over the same dataset (GET /runs/{id}/compare?with=): the count of each
 * change, the mean difference with its 95% interval, and every case. The baseline is picked from the
 * org's evals over this dataset, or typed; the gateway refuses (409) a run over another dataset.
 */
export function CompareEvals({ runId, datasetId }: { runId: string; datasetId: string | undefined }) {
  const [candidates, setCandidates] = useState<RunsPage['runs']>([]);
  const [listError, setListError] = useState<string>();
  const [baseline, setBaseline] = useState('');
  const [comparison, setComparison] = useState<EvalComparison>();
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<Outcome>();

  useEffect(() => {
    if (!datasetId) return;
    const abort = new AbortController();
    getJson<RunsPage>(`/runs?kind=eval&limit=${CANDIDATES}`, abort.signal)
      .then((page) => {
        const same = comparableEvals(page.runs, runId, datasetId);
        setCandidates(same);
        setBaseline((current) => current || same[0]?.run_id || '');
      })
      .catch((err: unknown) => !abort.signal.aborted && setListError(errorText(err)));
    return () => abort.abort();
  }, [runId, datasetId]);

  const compare = async () => {
    setBusy(true);
    setOutcome(undefined);
    setComparison(undefined);
    try {
      setComparison(await getJson<EvalComparison>(runPath(runId, `/compare?with=${encodeURIComponent(baseline.trim())}`)));
    } catch (err) {
      setOutcome(failureOf(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <section class="panel compare" aria-labelledby="compare-title">
      <h2 id="compare-title">Compare with another eval</h2>
      {!datasetId ? (
        <p class="muted">A synthetic eval has no dataset, so it cannot be compared: only evals over the same dataset compare.</p>
      ) : (
        <>
          <p class="hint">
            {`Evals over the same dataset (${datasetId.slice(0, 12)}): `}
            {listError ? `could not be listed (${listError}); type a run id.` : candidates.length === 0 ? 'none other yet; type a run id to try one.' : `${candidates.length} found.`}
          </p>
          <form
            aria-label="Compare with another eval"
            onSubmit={(e) => {
              e.preventDefault();
              void compare();
            }}
          >
            <label for="compare-with">Baseline eval</label>
            <input id="compare-with" list="compare-candidates" required value={baseline} onInput={(e) => setBaseline(e.currentTarget.value)} />
            <datalist id="compare-candidates">
              {candidates.map((r) => (
                <option key={r.run_id} value={r.run_id}>{`${r.state?.model ?? r.model ?? ''} · ${r.status} · ${formatTime(r.created_at)}`}</option>
              ))}
            </datalist>
            <button type="submit" disabled={busy || !baseline.trim()}>
              Compare
            </button>
          </form>
          <OutcomeLine outcome={outcome} testId="outcome-compare" />
          {comparison && <ComparisonView comparison={comparison} />}
        </>
      )}
    </section>
  );
}

function ComparisonView({ comparison }: { comparison: EvalComparison }) {
  return (
    <div class="comparison" data-testid="comparison">
      <p>
        {'This run against '}
        <Link href={runHref(comparison.with)}>{comparison.with}</Link>
        {`: mean ${scoreText(comparison.mean_current)} here, ${scoreText(comparison.mean_baseline)} there.`}
      </p>
      <p class="difference">
        <strong>Mean difference: </strong>
        <span data-testid="compare-difference">{differenceText(comparison)}</span>
      </p>
      <ul class="change-counts" data-testid="compare-counts" aria-label="Cases per change">
        {changeCounts(comparison).map(({ change, count }) => (
          <li key={change} class={`change change-${change}`} data-change={change} data-count={count}>
            {`${change} ${count}`}
          </li>
        ))}
      </ul>
      <table class="compare-table">
        <ColumnHeads names={['Case', 'Change', 'Baseline', 'This run', 'Difference']} />
        <tbody>
          {comparison.cases.map((c) => (
            <tr key={c.case_id} data-case-id={c.case_id} data-change={c.change}>
              <th scope="row">{c.case_id}</th>
              <td>
                <span class={`change change-${c.change}`}>{c.change}</span>
                {c.note ? <span class="hint">{` (${c.note})`}</span> : null}
              </td>
              <td class="num">{scoreText(c.baseline)}</td>
              <td class="num">{scoreText(c.current)}</td>
              <td class="num">{c.current !== null && c.baseline !== null ? signedText(c.current - c.baseline) : '—'}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
