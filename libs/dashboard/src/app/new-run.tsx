import { MAX_GOAL_CHARS } from '@agentrun/contracts';
import { useState } from 'preact/hooks';
import { postJson, type Accepted } from './api';
import { useDatasetList } from './datasets-page';
import { datasetChoices, evalStartBody, solverChoices, type DatasetChoice } from './eval-view';
import { datasetsHref, navigate, runHref } from './router';
import { failureOf, Link, OutcomeLine, type Outcome } from './ui';

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
  const [source, setSource] = useState<'synthetic' | 'dataset'>('synthetic');
  const [datasetValue, setDatasetValue] = useState('');
  const [solver, setSolver] = useState('');
  const [scorers, setScorers] = useState('');
  const [caseLimit, setCaseLimit] = useState('');
  const [modelEndpoint, setModelEndpoint] = useState('');
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<Outcome>();

  // The datasets to pick from, asked for each time the dataset source is chosen (one may just have been uploaded).
  const { list: datasets, error: datasetsError } = useDatasetList(kind === 'eval' && source === 'dataset');
  const choices: DatasetChoice[] = datasets ? datasetChoices(datasets) : [];
  const chosen = choices.find((c) => c.value === datasetValue) ?? choices[0];

  const submit = async () => {
    setBusy(true);
    setOutcome(undefined);
    const id = runId.trim() ? { run_id: runId.trim() } : {};
    try {
      const accepted =
        kind === 'agent'
          ? await postJson<Accepted>('/agents', { ...id, goal, max_steps: Number(maxSteps), policy, tier, ...SNAPSHOT_CHOICES[snapshots].body })
          : await postJson<Accepted>(
              '/evals',
              evalStartBody({ runId, model, reviewers, source, suite, cases, failFraction, dataset: chosen, solver, scorers, caseLimit, modelEndpoint }),
            );
      navigate(runHref(accepted.run_id), { started: true });
    } catch (err) {
      setOutcome(failureOf(err));
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
                <input id="start-goal" name="goal" required maxLength={MAX_GOAL_CHARS} value={goal} onInput={(e) => setGoal(e.currentTarget.value)} />
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
              <fieldset key="source" class="field wide source">
                <legend>Cases from</legend>
                <label class="inline">
                  <input type="radio" name="source" value="synthetic" checked={source === 'synthetic'} onChange={() => setSource('synthetic')} /> Made-up cases
                </label>
                <label class="inline">
                  <input type="radio" name="source" value="dataset" checked={source === 'dataset'} onChange={() => setSource('dataset')} /> A dataset
                </label>
              </fieldset>
              <div key="model" class="field">
                <label for="start-model">Model</label>
                <input id="start-model" name="model" required value={model} onInput={(e) => setModel(e.currentTarget.value)} />
              </div>
              {source === 'dataset' ? (
                <DatasetFields
                  choices={choices}
                  chosen={chosen}
                  loadError={datasetsError}
                  solvers={solverChoices(datasets)}
                  fields={{ solver, scorers, caseLimit, modelEndpoint }}
                  onDataset={setDatasetValue}
                  onSolver={setSolver}
                  onScorers={setScorers}
                  onCaseLimit={setCaseLimit}
                  onModelEndpoint={setModelEndpoint}
                />
              ) : (
                <>
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
                </>
              )}
              <div key="reviewers" class="field wide">
                <label for="start-reviewers">
                  Reviewers <span class="hint">(comma-separated; at least one: the subjects of the tokens that may approve)</span>
                </label>
                <input id="start-reviewers" name="reviewers" required value={reviewers} onInput={(e) => setReviewers(e.currentTarget.value)} />
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

interface DatasetFieldValues {
  solver: string;
  scorers: string;
  caseLimit: string;
  modelEndpoint: string;
}

/** An eval over a dataset: which one (suites and uploads), and the solver, scorers, case limit and endpoint; empty means the dataset's own. */
function DatasetFields(props: {
  choices: DatasetChoice[];
  chosen: DatasetChoice | undefined;
  loadError: string | undefined;
  solvers: string[];
  fields: DatasetFieldValues;
  onDataset: (value: string) => void;
  onSolver: (value: string) => void;
  onScorers: (value: string) => void;
  onCaseLimit: (value: string) => void;
  onModelEndpoint: (value: string) => void;
}) {
  const { choices, chosen, fields } = props;
  const groups = [
    { label: 'Suites shipped with the platform', members: choices.filter((c) => 'name' in c.dataset) },
    { label: 'Uploaded', members: choices.filter((c) => 'id' in c.dataset) },
  ];
  return (
    <>
      <div key="dataset" class="field wide">
        <label for="start-dataset">
          Dataset <span class="hint">(<Link href={datasetsHref}>upload one</Link>)</span>
        </label>
        <select id="start-dataset" name="dataset" required value={chosen?.value ?? ''} onChange={(e) => props.onDataset(e.currentTarget.value)}>
          {choices.length === 0 && <option value="">{props.loadError ? `could not list datasets: ${props.loadError}` : 'loading…'}</option>}
          {groups.map(
            ({ label, members }) =>
              members.length > 0 && (
                <optgroup key={label} label={label}>
                  {members.map((c) => (
                    <option key={c.value} value={c.value}>
                      {c.label}
                    </option>
                  ))}
                </optgroup>
              ),
          )}
        </select>
      </div>
      <div key="solver" class="field">
        <label for="start-solver">Solver</label>
        <select id="start-solver" name="solver" value={fields.solver} onChange={(e) => props.onSolver(e.currentTarget.value)}>
          <option value="">{`the dataset's (${chosen?.solver ?? 'generate'})`}</option>
          {props.solvers.map((s) => (
            <option key={s} value={s}>
              {s}
            </option>
          ))}
        </select>
      </div>
      <div key="scorers" class="field">
        <label for="start-scorers">
          Scorers <span class="hint">(comma-separated)</span>
        </label>
        <input id="start-scorers" name="scorers" placeholder={chosen ? `the dataset's: ${chosen.scorers.join(', ')}` : ''} value={fields.scorers} onInput={(e) => props.onScorers(e.currentTarget.value)} />
      </div>
      <div key="case_limit" class="field">
        <label for="start-case-limit">
          First cases <span class="hint">(optional)</span>
        </label>
        <input id="start-case-limit" name="case_limit" type="number" min={1} max={500} value={fields.caseLimit} onInput={(e) => props.onCaseLimit(e.currentTarget.value)} />
      </div>
      <div key="model_endpoint" class="field">
        <label for="start-model-endpoint">
          Model endpoint <span class="hint">(optional)</span>
        </label>
        <input id="start-model-endpoint" name="model_endpoint" pattern="[a-z0-9][a-z0-9_\-]{0,62}" value={fields.modelEndpoint} onInput={(e) => props.onModelEndpoint(e.currentTarget.value)} />
      </div>
    </>
  );
}
