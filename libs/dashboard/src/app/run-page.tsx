import type { RunEvent, RunStateView } from '@agentrun/contracts';
import { useEffect, useMemo, useState } from 'preact/hooks';
import { ApiError, errorText, getJson, runPath, type RunSummary } from './api';
import { BarChart, PALETTE } from './charts';
import { AgentControls, EvalControls } from './controls';
import { CaseResults } from './eval-cases';
import { CompareEvals } from './eval-compare';
import { justStarted, runHref, runsHref } from './router';
import { agentGauge, describeEvent, EventLog, evalSummary, isTerminalStatus, LiveReply, stepDurations, type CaseCell, type EvalSummary } from './run-view';
import { Snapshots } from './snapshots';
import { Transcript } from './conversation';
import { ForkDiff } from './diffs';
import { followRun, type StreamStatus } from './stream';
import { clockTime, formatTime, Link, StatusBadge } from './ui';

/** Events rendered at once; a long run's older events are one click away. */
const TIMELINE_SHOWN = 300;

const STREAM_WORDS: Record<StreamStatus, string> = {
  connecting: 'Connecting to the live stream…',
  live: 'Live',
  reconnecting: 'Connection lost; reconnecting and resuming after the last event…',
  ended: 'The run has ended; every event is shown',
  'not-found': 'Run not found (yet)',
  absent: 'Run not found',
  'signed-out': 'Signed out',
  closed: 'Stopped following',
};

export function RunPage({ runId }: { runId: string }) {
  const [summary, setSummary] = useState<RunSummary>();
  const [missing, setMissing] = useState<string>();
  const [loadError, setLoadError] = useState<string>();
  const log = useMemo(() => new EventLog(), [runId]);
  const reply = useMemo(() => new LiveReply(), [runId]);
  const [, setVersion] = useState(0);
  const [stream, setStream] = useState<StreamStatus>('connecting');
  const started = useMemo(justStarted, [runId]);
  const hasEvents = log.size > 0;

  // The row (kind, created, model); asked again once events show that a run not found yet exists.
  useEffect(() => {
    if (summary) return;
    const abort = new AbortController();
    getJson<RunSummary>(runPath(runId), abort.signal)
      .then((row) => {
        setSummary(row);
        setMissing(undefined);
      })
      .catch((err: unknown) => {
        if (abort.signal.aborted) return;
        if (err instanceof ApiError && err.status === 404) setMissing(err.detail);
        else setLoadError(errorText(err));
      });
    return () => abort.abort();
  }, [runId, hasEvents, summary]);

  // The whole timeline comes from the stream: from seq 1 on a (re)load, after the last contiguous
  // seq on a reconnect; the log keeps each seq once, so an overlap never shows twice.
  useEffect(
    () =>
      followRun(runId, () => log.contiguousSeq(), {
        onEvents: (events) => {
          if (log.add(events) > 0) setVersion((v) => v + 1);
        },
        onTokens: (deltas) => {
          if (deltas.filter((d) => reply.add(d)).length > 0) setVersion((v) => v + 1);
        },
        onStatus: (status, detail) => {
          setStream(status);
          if (status === 'not-found' || status === 'absent') setMissing(detail ?? 'run not found');
        },
      }),
    [runId, log, reply],
  );

  if (missing !== undefined && !hasEvents) {
    // A run started a moment ago is not in the read model until its first event is projected.
    if (started && stream !== 'absent') {
      return (
        <section aria-labelledby="starting-title" aria-busy="true">
          <h1 id="starting-title">{`Starting ${runId}…`}</h1>
          <p class="muted">The run was accepted; its first events are on their way.</p>
        </section>
      );
    }
    return (
      <section aria-labelledby="missing-title" data-testid="run-not-found">
        <h1 id="missing-title">Run not found</h1>
        <p>{missing}</p>
        <p class="muted">A run started a moment ago shows up here as soon as its first event is recorded.</p>
        <p>
          <Link href={runsHref}>Back to the runs</Link>
        </p>
      </section>
    );
  }

  const events = log.events();
  const state: RunStateView | undefined = log.latestState() ?? summary?.state;
  const status = state?.status ?? summary?.status;
  const kind = summary?.kind ?? events[0]?.kind;
  const parent = state?.parent_run_id ?? summary?.parent_run_id;
  const forkedFrom = state?.forked_from_snapshot;
  const evalView = kind === 'eval' ? evalSummary(state) : undefined;

  return (
    <article aria-labelledby="run-title" class="run-page">
      <nav aria-label="Breadcrumb" class="breadcrumb">
        <Link href={runsHref}>Runs</Link> / <span aria-current="page">{runId}</span>
      </nav>
      <header class="run-header">
        <h1 id="run-title">{runId}</h1>
        <StatusBadge status={status} />
        <dl class="facts">
          <div>
            <dt>Kind</dt>
            <dd>{kind ?? '…'}</dd>
          </div>
          <div>
            <dt>Created</dt>
            <dd>{formatTime(summary?.created_at)}</dd>
          </div>
          {parent && (
            <div>
              <dt>{forkedFrom ? 'Forked from' : 'Parent'}</dt>
              <dd>
                <Link href={runHref(parent)}>{parent}</Link>
                {forkedFrom ? ` at ${forkedFrom}` : ''}
              </dd>
            </div>
          )}
          {state?.workspace_host && (
            <div>
              <dt>Workspace host</dt>
              <dd data-testid="workspace-host">{state.workspace_host}</dd>
            </div>
          )}
          {state?.reason !== undefined && (
            <div>
              <dt>Reason</dt>
              <dd>
                {state.reason}
                {state.message !== undefined ? `: ${state.message}` : ''}
              </dd>
            </div>
          )}
        </dl>
      </header>
      <p class="stream-status" data-testid="stream-status" data-stream={stream}>
        {/* Announced when the connection or the run's status changes, not for every event. */}
        <span role="status">{`${STREAM_WORDS[stream]}${status ? ` · status ${status.replace(/_/g, ' ')}` : ''}`}</span>
        {` · ${events.length} event${events.length === 1 ? '' : 's'}`}
      </p>
      {loadError && (
        <p class="error" role="alert">
          {loadError}
        </p>
      )}
      {kind === 'agent' && <Answer text={answerOf(events) ?? summary?.state?.answer} />}
      <div class="run-grid">
        {kind === 'eval' ? <EvalOverview view={evalView} /> : <AgentOverview state={state} />}
        {kind === 'eval' ? (
          <EvalControls runId={runId} status={status} reviewers={evalView?.reviewers ?? []} />
        ) : kind === 'agent' ? (
          <AgentControls runId={runId} status={status} />
        ) : null}
      </div>
      {kind === 'agent' && <LiveAnswer reply={reply.current()} events={events} />}
      {kind === 'agent' && <Transcript runId={runId} events={events} />}
      {kind === 'eval' && evalView && <CaseGrid view={evalView} />}
      {kind === 'eval' && evalView && <CaseResults runId={runId} finished={evalView.done} />}
      {kind === 'eval' && evalView && <CompareEvals runId={runId} datasetId={evalView.dataset_id} />}
      {kind === 'agent' && <StepChart events={events} />}
      {kind === 'agent' && <Snapshots runId={runId} events={events} />}
      {kind === 'agent' && parent && forkedFrom && <ForkDiff runId={runId} parent={parent} ended={isTerminalStatus(status)} />}
      <Timeline events={events} ended={stream === 'ended' || isTerminalStatus(status)} />
    </article>
  );
}

/** An agent's answer, from its `run_finished` event (or its row, when the events are not all here). */
function answerOf(events: RunEvent[]): string | undefined {
  const finished = events.find((e) => e.type === 'run_finished');
  const answer = (finished?.payload as { answer?: unknown } | undefined)?.answer;
  return typeof answer === 'string' ? answer : undefined;
}

/** What the run produced, at the top of its page once it has ended with an answer. */
function Answer({ text }: { text: string | undefined }) {
  if (text === undefined) return null;
  return (
    <section class="panel answer" aria-labelledby="answer-title" data-testid="run-answer">
      <h2 id="answer-title">Answer</h2>
      <p class="reply-text">{text}</p>
    </section>
  );
}

/** A run's Spend and Budget lines (each when it has one), and why it waits when it is paused on its budget. */
function SpendLines({ kind, spend, budget, waiting }: { kind: 'agent' | 'eval'; spend: string | undefined; budget: string | undefined; waiting: string | undefined }) {
  return (
    <>
      {spend !== undefined && (
        <div>
          <dt>Spend</dt>
          <dd data-testid={`${kind}-spend`}>{spend}</dd>
        </div>
      )}
      {budget !== undefined && (
        <div>
          <dt>Budget</dt>
          <dd data-testid={`${kind}-budget`}>
            {budget}
            {waiting ? ` · paused: ${waiting} (raise the budget to go on)` : ''}
          </dd>
        </div>
      )}
    </>
  );
}

/**
 * The model's reply as it is written (the stream's `token` frames): live until its step's
 * `step_completed` arrives, then kept as the last reply until the next one starts.
 */
function LiveAnswer({ reply, events }: { reply: ReturnType<LiveReply['current']>; events: RunEvent[] }) {
  if (!reply) return null;
  const done = events.some((e) => e.type === 'step_completed' && (e.payload as { step?: number }).step === reply.step);
  return (
    <section class="panel live-answer" aria-labelledby="live-answer-title" aria-live="polite" data-testid="live-answer" data-step={reply.step} data-done={String(done)}>
      <h2 id="live-answer-title">{done ? `Model reply, step ${reply.step}` : `The model is writing (step ${reply.step}${reply.attempt > 1 ? `, attempt ${reply.attempt}` : ''})…`}</h2>
      <p class="reply-text" data-testid="live-answer-text">
        {reply.text}
      </p>
    </section>
  );
}

function AgentOverview({ state }: { state: RunStateView | undefined }) {
  const gauge = agentGauge(state);
  return (
    <section class="panel overview" aria-labelledby="overview-title">
      <h2 id="overview-title">Agent</h2>
      {!gauge ? (
        <p class="muted">Waiting for the run's first state…</p>
      ) : (
        <dl class="gauges">
          <div>
            <dt>Goal</dt>
            <dd data-testid="agent-goal">{gauge.goal}</dd>
          </div>
          <div>
            <dt id="step-label">Step</dt>
            <dd>
              <meter aria-labelledby="step-label" min={0} max={Math.max(1, gauge.max_steps)} value={gauge.step} />
              <span data-testid="agent-step">{` ${gauge.step} of ${gauge.max_steps}`}</span>
            </dd>
          </div>
          <div>
            <dt id="history-label">History</dt>
            <dd>
              {gauge.history ? (
                <>
                  <meter aria-labelledby="history-label" min={0} max={gauge.history.budget} high={gauge.history.budget * 0.8} value={gauge.history.length} />
                  {` ${gauge.history.length} of ${gauge.history.budget} events before it continues as new`}
                </>
              ) : (
                <span class="muted">not reported by this gateway</span>
              )}
            </dd>
          </div>
          <SpendLines kind="agent" spend={gauge.spend} budget={gauge.budget} waiting={state?.status === 'paused' && state.reason === 'budget_exhausted' ? 'a model call did not fit' : undefined} />
          {state?.policy !== undefined && (
            <div>
              <dt>Policy · tier</dt>
              <dd>{`${state.policy} · ${state.tier ?? ''}`}</dd>
            </div>
          )}
        </dl>
      )}
    </section>
  );
}

const score = (value: number | null | undefined): string => (typeof value === 'number' ? value.toFixed(3) : '—');

function EvalOverview({ view }: { view: EvalSummary | undefined }) {
  return (
    <section class="panel overview" aria-labelledby="overview-title">
      <h2 id="overview-title">Evaluation</h2>
      {!view ? (
        <p class="muted">Waiting for the run's first state…</p>
      ) : (
        <dl class="gauges">
          <div>
            <dt>Model · suite</dt>
            <dd>{`${view.model ?? '?'} · ${view.suite ?? '?'}`}</dd>
          </div>
          <div>
            <dt>Dataset · solver</dt>
            <dd data-testid="eval-dataset">{view.dataset_id ? `${view.dataset_id.slice(0, 12)} · ${view.solver ?? '?'}` : 'synthetic (made-up cases)'}</dd>
          </div>
          <div>
            <dt>Score so far</dt>
            <dd class="score" data-testid="eval-score">
              {score(view.score)}
            </dd>
          </div>
          <div>
            <dt id="cases-label">Cases finished</dt>
            <dd>
              <meter aria-labelledby="cases-label" min={0} max={Math.max(1, view.total)} value={view.done} />
              <span data-testid="eval-done">{` ${view.done} of ${view.total}`}</span>
              {` (ok ${view.counts.ok}, failed ${view.counts.failed}, ungraded ${view.counts.ungraded})`}
            </dd>
          </div>
          <div>
            <dt>Reviewers</dt>
            <dd>{view.reviewers.length ? view.reviewers.join(', ') : 'none listed'}</dd>
          </div>
          <SpendLines kind="eval" spend={view.spend} budget={view.budget} waiting={view.paused ? 'a case did not fit; the cases after it wait' : undefined} />
          {view.approved_by && (
            <div>
              <dt>Approved by</dt>
              <dd data-testid="approved-by">{view.approved_by}</dd>
            </div>
          )}
        </dl>
      )}
    </section>
  );
}

const CASE_COLOURS: Record<string, string> = { ok: '#059669', failed: '#dc2626', ungraded: '#6b7280', running: '#2563eb', pending: '#cbd5e1' };

function CaseGrid({ view }: { view: EvalSummary }) {
  const labels = useMemo(() => view.cases.map((c) => c.case_id), [view]);
  const datasets = useMemo(
    () => [
      {
        label: 'score',
        data: view.cases.map((c: CaseCell) => (c.status === 'ok' || c.status === 'failed' ? (c.score ?? 0) : null)),
        backgroundColor: view.cases.map((c) => CASE_COLOURS[c.status]),
      },
    ],
    [view],
  );
  return (
    <section class="panel cases" aria-labelledby="cases-title">
      <h2 id="cases-title">Cases</h2>
      <ul class="case-grid" aria-label="Cases and their results">
        {view.cases.map((c) => (
          <li key={c.case_id} class={`case case-${c.status}`} data-case-id={c.case_id} data-case-status={c.status}>
            <span class="case-id">{c.case_id}</span>
            <span class="case-status">{c.status}</span>
            <span class="case-score">{[c.score !== undefined ? c.score.toFixed(2) : '', c.error_type ?? ''].filter(Boolean).join(' · ')}</span>
            {c.attempts && c.attempts > 1 ? <span class="case-attempts">{`${c.attempts} attempts`}</span> : null}
          </li>
        ))}
      </ul>
      <h3>Score per case</h3>
      <BarChart
        testId="chart-case-scores"
        labels={labels}
        datasets={datasets}
        label={`Score per case: ${view.cases.map((c) => `${c.case_id} ${c.score !== undefined ? c.score.toFixed(2) : c.status}`).join(', ')}`}
        xTitle="case"
        yTitle="score"
        yMax={1}
      />
    </section>
  );
}

function StepChart({ events }: { events: RunEvent[] }) {
  const steps = useMemo(() => stepDurations(events), [events]);
  const lanes = useMemo(() => [...new Set(steps.map((s) => s.lane))], [steps]);
  const labels = useMemo(() => steps.map((s) => String(s.step)), [steps]);
  const datasets = useMemo(
    () =>
      lanes.map((lane, i) => ({
        label: lane,
        data: steps.map((s) => (s.lane === lane ? Math.round(s.seconds * 1000) / 1000 : null)),
        backgroundColor: PALETTE[i % PALETTE.length],
      })),
    [steps, lanes],
  );
  const perLane = lanes.map((lane) => {
    const mine = steps.filter((s) => s.lane === lane);
    const total = mine.reduce((sum, s) => sum + s.seconds, 0);
    const hosts = [...new Set(mine.flatMap((s) => (s.host ? [s.host] : [])))];
    return { lane, count: mine.length, total, mean: total / mine.length, hosts };
  });
  // Lanes are grouped without their workspace host; the hosts they ran on stay in the table (and in the timeline).
  const onHosts = perLane.some((l) => l.hosts.length > 0);
  return (
    <section class="panel steps" aria-labelledby="steps-title">
      <h2 id="steps-title">Step durations per lane</h2>
      {steps.length === 0 ? (
        <p class="muted">No step has finished yet.</p>
      ) : (
        <div class="steps-body">
          <BarChart
            testId="chart-step-durations"
            labels={labels}
            datasets={datasets}
            stacked
            label={`Step durations in seconds, per lane: ${perLane.map((l) => `${l.lane} mean ${l.mean.toFixed(2)} s over ${l.count} steps`).join('; ')}`}
            xTitle="step"
            yTitle="seconds"
          />
          <table class="lane-table">
            <caption>Per lane</caption>
            <thead>
              <tr>
                <th scope="col">Lane</th>
                <th scope="col">Steps</th>
                <th scope="col">Mean</th>
                <th scope="col">Total</th>
                {onHosts && <th scope="col">Hosts</th>}
              </tr>
            </thead>
            <tbody>
              {perLane.map((l) => (
                <tr key={l.lane}>
                  <th scope="row">{l.lane}</th>
                  <td>{l.count}</td>
                  <td>{`${l.mean.toFixed(2)} s`}</td>
                  <td>{`${l.total.toFixed(2)} s`}</td>
                  {onHosts && <td>{l.hosts.join(', ')}</td>}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

function Timeline({ events, ended }: { events: RunEvent[]; ended: boolean }) {
  const [all, setAll] = useState(false);
  const newestFirst = useMemo(() => [...events].reverse(), [events]);
  const shown = all ? newestFirst : newestFirst.slice(0, TIMELINE_SHOWN);
  return (
    <section class="panel timeline-panel" aria-labelledby="timeline-title">
      <h2 id="timeline-title">Timeline</h2>
      <p class="muted">
        {`Newest first. ${events.length} event${events.length === 1 ? '' : 's'}${ended ? '' : ', more arriving live'}.`}
      </p>
      <ol class="timeline" reversed tabIndex={0} aria-label="Run events, newest first">
        {shown.map((event) => (
          <li key={event.seq} data-seq={event.seq} data-type={event.type} class={`event event-${event.type}`}>
            <span class="seq">{`#${event.seq}`}</span>
            <time dateTime={event.ts}>{clockTime(event.ts)}</time>
            <span class="type">{event.type.replace(/_/g, ' ')}</span>
            <span class="desc">{describeEvent(event)}</span>
          </li>
        ))}
      </ol>
      {shown.length < events.length && (
        <button type="button" class="secondary" onClick={() => setAll(true)}>
          {`Show all ${events.length} events`}
        </button>
      )}
    </section>
  );
}
