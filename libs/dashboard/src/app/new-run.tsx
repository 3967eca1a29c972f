import { useState } from 'preact/hooks';
import { ApiError, postJson, type Accepted } from './api';
import { navigate, runHref } from './router';
import { OutcomeLine, type Outcome } from './ui';

type Kind = 'agent' | 'eval';

/** Starts an agent (POST /agents) or an eval (POST /evals) and opens its page. */
export function NewRunForm() {
  const [kind, setKind] = useState<Kind>('agent');
  const [runId, setRunId] = useState('');
  const [goal, setGoal] = useState('');
  const [maxSteps, setMaxSteps] = useState('8');
  const [policy, setPolicy] = useState('scripted');
  const [tier, setTier] = useState('team');
  const [model, setModel] = useState('');
  const [suite, setSuite] = useState('smoke');
  const [cases, setCases] = useState('12');
  const [failFraction, setFailFraction] = useState('0.25');
  const [reviewers, setReviewers] = useState('');
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<Outcome>();

  const submit = async () => {
    setBusy(true);
    setOutcome(undefined);
    const id = runId.trim() ? { run_id: runId.trim() } : {};
    try {
      const accepted =
        kind === 'agent'
          ? await postJson<Accepted>('/agents', { ...id, goal, max_steps: Number(maxSteps), policy, tier })
          : await postJson<Accepted>('/evals', {
              ...id,
              model: model.trim(),
              suite: suite.trim(),
              cases: Number(cases),
              fail_fraction: Number(failFraction),
              reviewers: reviewers
                .split(',')
                .map((r) => r.trim())
                .filter(Boolean),
            });
      navigate(runHref(accepted.run_id), { started: true });
    } catch (err) {
      setOutcome(err instanceof ApiError ? { ok: false, text: err.detail, title: err.title, status: err.status } : { ok: false, text: String(err) });
    } finally {
      setBusy(false);
    }
  };

  return (
    <details class="panel new-run">
      <summary>Start a run</summary>
      <form
        aria-label="Start a run"
        onSubmit={(e) => {
          e.preventDefault();
          void submit();
        }}
      >
        <fieldset class="kind">
          <legend>Kind</legend>
          {(['agent', 'eval'] as const).map((k) => (
            <label key={k} class="inline">
              <input type="radio" name="kind" value={k} checked={kind === k} onChange={() => setKind(k)} /> {k === 'agent' ? 'Agent run' : 'Eval run'}
            </label>
          ))}
        </fieldset>
        <div class="fields">
          <label>
            Run id <span class="hint">(optional)</span>
            <input name="run_id" value={runId} onInput={(e) => setRunId(e.currentTarget.value)} pattern="[A-Za-z0-9][A-Za-z0-9._\-]{0,99}" />
          </label>
          {kind === 'agent' ? (
            <>
              <label key="goal" class="wide">
                Goal
                <input name="goal" required maxLength={500} value={goal} onInput={(e) => setGoal(e.currentTarget.value)} />
              </label>
              <label key="max_steps">
                Max steps
                <input name="max_steps" type="number" min={1} max={10000} required value={maxSteps} onInput={(e) => setMaxSteps(e.currentTarget.value)} />
              </label>
              <label key="policy">
                Policy
                <select name="policy" value={policy} onChange={(e) => setPolicy(e.currentTarget.value)}>
                  <option value="scripted">scripted</option>
                  <option value="llm">llm</option>
                </select>
              </label>
              <label key="tier">
                Tier
                <select name="tier" value={tier} onChange={(e) => setTier(e.currentTarget.value)}>
                  <option value="enterprise">enterprise</option>
                  <option value="team">team</option>
                  <option value="batch">batch</option>
                </select>
              </label>
            </>
          ) : (
            <>
              <label key="model">
                Model
                <input name="model" required value={model} onInput={(e) => setModel(e.currentTarget.value)} />
              </label>
              <label key="suite">
                Suite
                <input name="suite" required value={suite} onInput={(e) => setSuite(e.currentTarget.value)} />
              </label>
              <label key="cases">
                Cases
                <input name="cases" type="number" min={1} max={500} required value={cases} onInput={(e) => setCases(e.currentTarget.value)} />
              </label>
              <label key="fail_fraction">
                Fail fraction
                <input name="fail_fraction" type="number" min={0} max={1} step={0.05} required value={failFraction} onInput={(e) => setFailFraction(e.currentTarget.value)} />
              </label>
              <label key="reviewers" class="wide">
                Reviewers <span class="hint">(comma-separated)</span>
                <input name="reviewers" value={reviewers} onInput={(e) => setReviewers(e.currentTarget.value)} />
              </label>
            </>
          )}
        </div>
        <button type="submit" disabled={busy}>
          {kind === 'agent' ? 'Start agent run' : 'Start eval run'}
        </button>
        <OutcomeLine outcome={outcome} testId="start-outcome" />
      </form>
    </details>
  );
}
