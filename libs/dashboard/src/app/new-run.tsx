import { useState } from 'preact/hooks';
import { ApiError, postJson, type Accepted } from './api';
import { navigate, runHref } from './router';
import { OutcomeLine, type Outcome } from './ui';

type Kind = 'agent' | 'eval';

/** The capture series a run may be started with (a fork starts from one of its snapshots). */
const SNAPSHOT_CHOICES = {
  none: { label: 'none', body: {} },
  end: { label: 'one at the end', body: { snapshots: { at_end: true } } },
  turns: { label: 'every turn, and one at the end', body: { snapshots: { per_turn: true, at_end: true } } },
} as const;

/** Starts an agent (POST /agents) or an eval (POST /evals) and opens its page. */
export function NewRunForm() {
  const [kind, setKind] = useState<Kind>('agent');
  const [runId, setRunId] = useState('');
  const [goal, setGoal] = useState('');
  const [maxSteps, setMaxSteps] = useState('8');
  const [policy, setPolicy] = useState('scripted');
  const [tier, setTier] = useState('team');
  const [snapshots, setSnapshots] = useState<'none' | 'end' | 'turns'>('none');
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
          ? await postJson<Accepted>('/agents', { ...id, goal, max_steps: Number(maxSteps), policy, tier, ...SNAPSHOT_CHOICES[snapshots].body })
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
          <div class="field">
            <label for="start-run-id">
              Run id <span class="hint">(optional)</span>
            </label>
            <input id="start-run-id" name="run_id" value={runId} onInput={(e) => setRunId(e.currentTarget.value)} pattern="[A-Za-z0-9][A-Za-z0-9._\-]{0,99}" />
          </div>
          {kind === 'agent' ? (
            <>
              <div key="goal" class="field wide">
                <label for="start-goal">Goal</label>
                <input id="start-goal" name="goal" required maxLength={500} value={goal} onInput={(e) => setGoal(e.currentTarget.value)} />
              </div>
              <div key="max_steps" class="field">
                <label for="start-max-steps">Max steps</label>
                <input id="start-max-steps" name="max_steps" type="number" min={1} max={10000} required value={maxSteps} onInput={(e) => setMaxSteps(e.currentTarget.value)} />
              </div>
              <div key="policy" class="field">
                <label for="start-policy">Policy</label>
                <select id="start-policy" name="policy" value={policy} onChange={(e) => setPolicy(e.currentTarget.value)}>
                  <option value="scripted">scripted</option>
                  <option value="llm">llm</option>
                </select>
              </div>
              <div key="snapshots" class="field">
                <label for="start-snapshots">Snapshots</label>
                <select id="start-snapshots" name="snapshots" value={snapshots} onChange={(e) => setSnapshots(e.currentTarget.value as keyof typeof SNAPSHOT_CHOICES)}>
                  {Object.entries(SNAPSHOT_CHOICES).map(([value, choice]) => (
                    <option key={value} value={value}>
                      {choice.label}
                    </option>
                  ))}
                </select>
              </div>
              <div key="tier" class="field">
                <label for="start-tier">Tier</label>
                <select id="start-tier" name="tier" value={tier} onChange={(e) => setTier(e.currentTarget.value)}>
                  <option value="enterprise">enterprise</option>
                  <option value="team">team</option>
                  <option value="batch">batch</option>
                </select>
              </div>
            </>
          ) : (
            <>
              <div key="model" class="field">
                <label for="start-model">Model</label>
                <input id="start-model" name="model" required value={model} onInput={(e) => setModel(e.currentTarget.value)} />
              </div>
              <div key="suite" class="field">
                <label for="start-suite">Suite</label>
                <input id="start-suite" name="suite" required value={suite} onInput={(e) => setSuite(e.currentTarget.value)} />
              </div>
              <div key="cases" class="field">
                <label for="start-cases">Cases</label>
                <input id="start-cases" name="cases" type="number" min={1} max={500} required value={cases} onInput={(e) => setCases(e.currentTarget.value)} />
              </div>
              <div key="fail_fraction" class="field">
                <label for="start-fail-fraction">Fail fraction</label>
                <input id="start-fail-fraction" name="fail_fraction" type="number" min={0} max={1} step={0.05} required value={failFraction} onInput={(e) => setFailFraction(e.currentTarget.value)} />
              </div>
              <div key="reviewers" class="field wide">
                <label for="start-reviewers">
                  Reviewers <span class="hint">(comma-separated)</span>
                </label>
                <input id="start-reviewers" name="reviewers" value={reviewers} onInput={(e) => setReviewers(e.currentTarget.value)} />
              </div>
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
