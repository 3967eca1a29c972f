import { useState } from 'preact/hooks';
import { ApiError, postJson, runPath, type Accepted } from './api';
import { runHref } from './router';
import { session } from './session';
import { isTerminalStatus } from './run-view';
import { OutcomeLine, type Outcome } from './ui';

/** One control's request and what came of it: the gateway's own words either way. */
export function useCommand(): { busy: boolean; outcome: Outcome | undefined; send: (what: string, path: string, body?: unknown, link?: (a: Accepted) => Outcome) => Promise<boolean> } {
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<Outcome>();
  const send = async (what: string, path: string, body: unknown = {}, link?: (a: Accepted) => Outcome): Promise<boolean> => {
    setBusy(true);
    setOutcome(undefined);
    try {
      const accepted = await postJson<Accepted>(path, body);
      setOutcome(link ? link(accepted) : { ok: true, text: `${what}: ${accepted.outcome}${accepted.message ? ` (${accepted.message})` : ''}` });
      return true;
    } catch (err) {
      setOutcome(err instanceof ApiError ? { ok: false, text: err.detail, title: err.title, status: err.status } : { ok: false, text: String(err) });
      return false;
    } finally {
      setBusy(false);
    }
  };
  return { busy, outcome, send };
}

export function AgentControls({ runId, status }: { runId: string; status: string | undefined }) {
  const buttons = useCommand();
  const inject = useCommand();
  const goal = useCommand();
  const [text, setText] = useState('');
  const [newGoal, setNewGoal] = useState('');
  const over = isTerminalStatus(status);

  return (
    <section class="panel controls" aria-labelledby="controls-title">
      <h2 id="controls-title">Controls</h2>
      {over && <p class="muted">The run has ended; only what applies to a finished run is on.</p>}
      <div class="button-row">
        <button type="button" disabled={buttons.busy || status !== 'running'} onClick={() => void buttons.send('pause', runPath(runId, '/pause'))}>
          Pause
        </button>
        <button type="button" disabled={buttons.busy || status !== 'paused'} onClick={() => void buttons.send('resume', runPath(runId, '/resume'))}>
          Resume
        </button>
        <button type="button" class="danger" disabled={buttons.busy || over || status === 'cancelling'} onClick={() => void buttons.send('cancel', runPath(runId, '/cancel'))}>
          Cancel run
        </button>
      </div>
      <OutcomeLine outcome={buttons.outcome} testId="outcome-buttons" />

      <form
        onSubmit={(e) => {
          e.preventDefault();
          void inject.send('inject context', runPath(runId, '/inject-context'), { text }).then((ok) => ok && setText(''));
        }}
      >
        <label for="inject-text">Context to inject</label>
        <textarea id="inject-text" rows={2} maxLength={4096} required value={text} onInput={(e) => setText(e.currentTarget.value)} />
        <button type="submit" disabled={inject.busy || over}>
          Inject context
        </button>
        <OutcomeLine outcome={inject.outcome} testId="outcome-inject" />
      </form>

      <form
        onSubmit={(e) => {
          e.preventDefault();
          void goal.send('change goal', runPath(runId, '/change-goal'), { goal: newGoal });
        }}
      >
        <label for="new-goal">New goal</label>
        <input id="new-goal" required value={newGoal} onInput={(e) => setNewGoal(e.currentTarget.value)} />
        <button type="submit" disabled={goal.busy || over}>
          Change goal
        </button>
        <OutcomeLine outcome={goal.outcome} testId="outcome-change-goal" />
      </form>
    </section>
  );
}

export function EvalControls({ runId, status, reviewers }: { runId: string; status: string | undefined; reviewers: string[] }) {
  const cancel = useCommand();
  const approve = useCommand();
  const retry = useCommand();
  const [reviewer, setReviewer] = useState('');
  const over = isTerminalStatus(status);
  const current = session.value;
  // Signed in by a token, the gateway approves as the token's subject and takes no other name; only
  // local mode's X-Org (which authenticates nobody) names the reviewer here.
  const asSubject = current.kind === 'token';
  const subject = current.kind === 'token' ? current.subject : undefined;

  return (
    <section class="panel controls" aria-labelledby="controls-title">
      <h2 id="controls-title">Controls</h2>
      {over && <p class="muted">The run has ended; only what applies to a finished run is on.</p>}
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void approve.send('approve', runPath(runId, '/approve'), asSubject ? {} : { reviewer: reviewer.trim() });
        }}
      >
        {asSubject ? (
          <p class="hint" data-testid="approve-as">
            {subject ? `You approve as ${subject}.` : 'This token has no subject, so it cannot approve; sign in with a token made with --subject.'}
          </p>
        ) : (
          <>
            <label for="reviewer">Reviewer</label>
            <input id="reviewer" list="reviewers" required autocomplete="off" value={reviewer} onInput={(e) => setReviewer(e.currentTarget.value)} />
            <datalist id="reviewers">
              {reviewers.map((r) => (
                <option key={r} value={r} />
              ))}
            </datalist>
          </>
        )}
        <button type="submit" disabled={approve.busy || status !== 'awaiting_review' || (asSubject && !subject)}>
          {subject ? `Approve as ${subject}` : 'Approve'}
        </button>
        <OutcomeLine outcome={approve.outcome} testId="outcome-approve" />
      </form>
      <div class="button-row">
        <button
          type="button"
          disabled={retry.busy || !over}
          onClick={() =>
            void retry.send('retry failed', runPath(runId, '/retry-failed'), {}, (a) => {
              const started = /^started (\S+)/.exec(a.message ?? '')?.[1];
              return { ok: true, text: a.message ?? `retry failed: ${a.outcome}`, ...(started ? { link: { href: runHref(started), label: `Open ${started}` } } : {}) };
            })
          }
        >
          Retry failed cases
        </button>
        <button type="button" class="danger" disabled={cancel.busy || over || status === 'cancelling'} onClick={() => void cancel.send('cancel', runPath(runId, '/cancel'))}>
          Cancel run
        </button>
      </div>
      <OutcomeLine outcome={retry.outcome} testId="outcome-retry" />
      <OutcomeLine outcome={cancel.outcome} testId="outcome-cancel" />
    </section>
  );
}
