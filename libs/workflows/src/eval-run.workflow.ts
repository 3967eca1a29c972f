import {
  ActivityFailure,
  allHandlersFinished,
  ApplicationFailure,
  CancellationScope,
  condition,
  defineQuery,
  defineSignal,
  defineUpdate,
  isCancellation,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import { isTerminal, type EvalStatus, type RunEventType } from '@agentrun/contracts';
import {
  NOT_THE_AGENTS_FAULT,
  type CaseErrorType,
  type CaseView,
  type EvalActivities,
  type EvalRunInput,
  type EvalRunState,
} from './eval-run.types';
import { openOutbox } from './outbox';
import { AGENT_STATUS_KEY } from './search-attributes';

export const cancelEvalSignal = defineSignal<[{ command_id: string }]>('cancel_eval');
/** An Update: the reviewer learns whether the approval was taken. */
export const approveUpdate = defineUpdate<string, [{ command_id: string; reviewer: string }]>('approve');
export const evalStatusQuery = defineQuery<EvalRunState & { processed_command_ids: string[] }>('eval_status');

const CASE_RETRY = {
  initialInterval: '200ms',
  backoffCoefficient: 2,
  maximumInterval: '2s',
  maximumAttempts: 8,
  // A benchmark failure is a result, not an accident: never retried.
  nonRetryableErrorTypes: ['CaseFailed', 'BadArguments'],
};

/**
 * An evaluation: its cases fanned out on the GPU lane, `parallelism` at a time; a benchmark failure
 * is recorded, a transient GPU error retried; then it waits in `awaiting_review` until a listed
 * reviewer approves, and is `published`.
 */
export async function EvalRun(input: EvalRunInput): Promise<EvalStatus> {
  let status: EvalStatus = 'queued';
  let approvedBy: string | undefined;
  let cancelRequested = false;
  let failure: { reason: string; message: string } | undefined;
  const processed = new Set<string>();
  const cases: Record<string, CaseView> = Object.fromEntries(input.case_ids.map((id) => [id, { status: 'pending' } satisfies CaseView]));

  const tally = () => {
    const views = Object.values(cases);
    const ok = views.filter((c) => c.status === 'ok');
    const failed = views.filter((c) => c.status === 'failed');
    const graded = [...ok, ...failed];
    return {
      done: ok.length + failed.length + views.filter((c) => c.status === 'ungraded').length,
      counts: { ok: ok.length, failed: failed.length, ungraded: views.filter((c) => c.status === 'ungraded').length },
      score: graded.length ? Math.round((graded.reduce((sum, c) => sum + (c.score ?? 0), 0) / graded.length) * 1000) / 1000 : null,
    };
  };
  const state = (): EvalRunState => ({
    status,
    model: input.model,
    suite: input.suite,
    total: input.case_ids.length,
    ...tally(),
    cases,
    reviewers: input.reviewers,
    ...(approvedBy ? { approved_by: approvedBy } : {}),
    ...(input.parent_run_id ? { parent_run_id: input.parent_run_id } : {}),
    ...(failure ? { reason: failure.reason, message: failure.message } : {}),
  });
  const outbox = openOutbox({ org: input.org, run_id: input.run_id, kind: 'eval', lane: input.lanes.agentWorkflows, firstSeq: 0, state });
  const setStatus = (next: EvalStatus, type: RunEventType = 'status_changed', extra: Record<string, unknown> = {}): void => {
    status = next;
    upsertSearchAttributes([{ key: AGENT_STATUS_KEY, value: status }]);
    outbox.emit(type, extra);
  };

  const { runCase } = proxyActivities<EvalActivities>({
    taskQueue: input.lanes.gpuEval,
    startToCloseTimeout: '10m',
    // A cancel reaches a case at its next heartbeat.
    heartbeatTimeout: `${input.case_heartbeat_s}s`,
    retry: CASE_RETRY,
  });

  const fanOut = new CancellationScope();
  setHandler(cancelEvalSignal, ({ command_id }) => {
    if (processed.has(command_id) || cancelRequested || isTerminal(status)) return;
    processed.add(command_id);
    cancelRequested = true;
    setStatus('cancelling', 'status_changed', { command_id });
    fanOut.cancel();
  });
  setHandler(
    approveUpdate,
    ({ command_id, reviewer }) => {
      if (processed.has(command_id)) return `ignored: command ${command_id} already applied`;
      processed.add(command_id);
      approvedBy = reviewer;
      setStatus('published', 'status_changed', { command_id, reviewer });
      return `approved by ${reviewer}`;
    },
    {
      validator: ({ command_id, reviewer }) => {
        if (!command_id) throw new Error('command_id is required');
        if (processed.has(command_id)) return; // a repeat answers `ignored`
        if (!input.reviewers.includes(reviewer)) throw new Error(`not_a_reviewer: '${reviewer}' is not a reviewer of this run`);
        if (status !== 'awaiting_review') throw new Error(`the run is ${status}, not awaiting review`);
      },
    },
  );
  setHandler(evalStatusQuery, () => ({ ...state(), processed_command_ids: [...processed].sort() }));

  const evaluate = async (caseId: string): Promise<void> => {
    cases[caseId] = { status: 'running' };
    let view: CaseView;
    try {
      const result = await runCase({ key: `${input.org}/${input.run_id}:${caseId}`, org: input.org, run_id: input.run_id, case_id: caseId, fail_fraction: input.fail_fraction });
      view = { status: 'ok', score: result.score, attempts: result.attempt };
    } catch (err) {
      const cause = err instanceof ActivityFailure ? err.cause : undefined;
      if (!(cause instanceof ApplicationFailure && cause.type === 'CaseFailed')) throw err;
      const errorType = ((cause.details?.[0] as { error_type?: CaseErrorType } | undefined)?.error_type ?? 'agent_error') as CaseErrorType;
      const ungraded = input.errored_ungraded && NOT_THE_AGENTS_FAULT.includes(errorType);
      view = { status: ungraded ? 'ungraded' : 'failed', score: ungraded ? undefined : 0, error_type: errorType };
    }
    cases[caseId] = view;
    outbox.emit('case_finished', { case_id: caseId, ...view });
  };

  try {
    setStatus('running', 'run_started');
    const queue = [...input.case_ids];
    await fanOut.run(() =>
      Promise.all(
        Array.from({ length: Math.min(input.parallelism, queue.length) }, async () => {
          for (let next = queue.shift(); next !== undefined; next = queue.shift()) await evaluate(next);
        }),
      ),
    );
    setStatus('awaiting_review');
    await condition(() => status === 'published' || cancelRequested);
    if (cancelRequested) setStatus('cancelled', 'run_finished');
    else outbox.emit('run_finished');
  } catch (err) {
    if (cancelRequested && isCancellation(err)) {
      for (const [id, view] of Object.entries(cases)) if (view.status === 'running' || view.status === 'pending') cases[id] = { status: 'pending' };
      setStatus('cancelled', 'run_finished');
    } else if (isCancellation(err)) {
      await CancellationScope.nonCancellable(async () => {
        setStatus('cancelled', 'run_finished');
        await outbox.drain();
      });
      throw err;
    } else {
      failure = { reason: 'case_error', message: err instanceof Error ? err.message : String(err) };
      setStatus('failed', 'run_finished');
      await outbox.drain();
      throw ApplicationFailure.nonRetryable(failure.message, failure.reason);
    }
  }
  await condition(allHandlersFinished);
  await outbox.drain();
  return status;
}
