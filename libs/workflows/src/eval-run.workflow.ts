import {
  ActivityCancellationType,
  ActivityFailure,
  allHandlersFinished,
  ApplicationFailure,
  CancellationScope,
  ChildWorkflowFailure,
  condition,
  executeChild,
  defineQuery,
  defineSignal,
  defineUpdate,
  isCancellation,
  patched,
  proxyActivities,
  setHandler,
  startChild,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import { isTerminal, workflowIdFor, type BudgetShortfall, type CaseResult, type EvalStatus, type RunBudget } from '@agentrun/contracts';
import { EvalLoopState } from './eval-run.state';
import {
  NOT_THE_AGENTS_FAULT,
  type AgentCaseRun,
  type CaseErrorType,
  type CaseOutcome,
  type CaseRequest,
  type CaseView,
  type EvalActivities,
  type EvalRunInput,
  type EvalRunState,
} from './eval-run.types';
import { openOutbox, type EmitFields, type Outbox, type StatusEventType } from './outbox';
import { AGENT_STATUS_KEY } from './search-attributes';
import { budgetShortfallOf, type AgentRun } from './agent-run.workflow';
import type { AgentRunInput, AgentRunResult } from './agent-run.types';
import { validateBudgetRaise } from './agent-run.handlers';
import { budgetLimitsSignal, caseBudgetExhaustedSignal, raiseBudgetUpdate } from './definitions';

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

type SetStatus = <T extends StatusEventType = 'status_changed'>(next: EvalStatus, type?: T, ...fields: EmitFields<T>) => void;

function statusSetter(run: EvalLoopState, outbox: Outbox): SetStatus {
  return <T extends StatusEventType = 'status_changed'>(next: EvalStatus, type?: T, ...fields: EmitFields<T>) => {
    run.status = next;
    upsertSearchAttributes([{ key: AGENT_STATUS_KEY, value: next }]);
    outbox.emit((type ?? 'status_changed') as T, ...fields);
  };
}

/**
 * Cancel stops the fan-out at once; approval is refused unless a listed reviewer sends it while the run
 * awaits review; a budget raise (each limit higher than the eval's) lets cases waiting on it go on.
 */
function registerEvalRunHandlers(input: EvalRunInput, run: EvalLoopState, setStatus: SetStatus, fanOut: CancellationScope, outbox: Outbox): void {
  const { processed } = run;
  setHandler(cancelEvalSignal, ({ command_id }) => {
    if (processed.has(command_id) || run.cancelRequested || isTerminal(run.status)) return;
    processed.add(command_id);
    run.cancelRequested = true;
    setStatus('cancelling', 'status_changed', { command_id });
    fanOut.cancel();
  });
  setHandler(
    approveUpdate,
    ({ command_id, reviewer }) => {
      if (processed.has(command_id)) return `ignored: command ${command_id} already applied`;
      processed.add(command_id);
      run.approvedBy = reviewer;
      setStatus('published', 'status_changed', { command_id, reviewer });
      return `approved by ${reviewer}`;
    },
    {
      validator: ({ command_id, reviewer }) => {
        if (!command_id) throw new Error('command_id is required');
        if (processed.has(command_id)) return; // a repeat answers `ignored`
        if (!input.reviewers.includes(reviewer)) throw new Error(`not_a_reviewer: '${reviewer}' is not a reviewer of this run`);
        if (run.status !== 'awaiting_review') throw new Error(`the run is ${run.status}, not awaiting review`);
      },
    },
  );
  setHandler(
    raiseBudgetUpdate,
    ({ command_id, max_tokens, max_cost_usd }) => {
      if (processed.has(command_id)) return `ignored: command ${command_id} already applied`;
      processed.add(command_id);
      const previous = { ...(run.budget ?? {}) };
      run.budget = { ...previous, ...(max_tokens !== undefined ? { max_tokens } : {}), ...(max_cost_usd !== undefined ? { max_cost_usd } : {}) };
      run.budgetRaises++;
      outbox.emit('budget_raised', { command_id, previous });
      return 'budget raised';
    },
    {
      validator: (raise) =>
        // Cases run only until review: after that there is nothing left to spend on.
        validateBudgetRaise({ status: run.status, spendLimit: run.budget, settling: () => run.cancelRequested || isTerminal(run.status) || run.status === 'awaiting_review' }, raise),
    },
  );
  setHandler(evalStatusQuery, () => ({ ...run.view(), processed_command_ids: [...processed].sort() }));
}

/** An agent case's run: the eval run's id and the case's, so it reads as the case's run in every list. */
export function agentCaseRunId(evalRunId: string, caseId: string): string {
  return `${evalRunId}.${caseId}`;
}

/** The benchmark failure a case ended with, if that is how it ended: the case ran and recorded its result. */
function benchmarkFailure(err: unknown): ApplicationFailure | undefined {
  const cause = err instanceof ActivityFailure ? err.cause : undefined;
  return cause instanceof ApplicationFailure && cause.type === 'CaseFailed' ? cause : undefined;
}

/**
 * An agent case's run that spends under its eval's budget: started with the eval's limits, it is sent
 * each raise of them while it runs (it may be paused on them: it goes on). Returns its result as
 * `executeChild` would; a cancel of the fan-out reaches the run, whose answer is awaited.
 */
async function runUnderBudget(input: EvalRunInput, run: EvalLoopState, options: { workflowId: string; taskQueue: string; args: [AgentRunInput] }, raisesAtStart: number): Promise<AgentRunResult> {
  const child = await startChild<typeof AgentRun>('AgentRun', options);
  const result = child.result();
  let ended = false;
  result.then(
    () => (ended = true),
    () => (ended = true),
  );
  try {
    for (let told = raisesAtStart; ; ) {
      await condition(() => ended || run.budgetRaises > told);
      if (ended) break;
      told = run.budgetRaises;
      // A run that has just ended cannot take it, and needs not.
      await child.signal(budgetLimitsSignal, { command_id: `${input.run_id}:budget:${told}`, limits: run.budget ?? {} }).catch(() => undefined);
    }
  } catch (err) {
    if (!isCancellation(err)) throw err;
  }
  return result;
}

/** Whether two sets of limits are the same (an absent limit is none). */
function sameLimits(a: RunBudget | undefined, b: RunBudget | undefined): boolean {
  return a?.max_tokens === b?.max_tokens && a?.max_cost_usd === b?.max_cost_usd;
}

/** A case's outcome: a benchmark failure is a result (scored 0, or ungraded when the agent did not cause it); anything else throws. */
function failedCase(input: EvalRunInput, err: unknown): { view: CaseView; result?: CaseResult } {
  const cause = benchmarkFailure(err);
  if (!cause) throw err;
  const details = cause.details?.[0] as { error_type?: CaseErrorType; result?: CaseResult; attempt?: number } | undefined;
  const errorType = (details?.error_type ?? 'agent_error') as CaseErrorType;
  const ungraded = input.errored_ungraded && NOT_THE_AGENTS_FAULT.includes(errorType);
  const view: CaseView = { status: ungraded ? 'ungraded' : 'failed', score: ungraded ? undefined : 0, error_type: errorType };
  if (details?.attempt !== undefined) view.attempts = details.attempt;
  return details?.result ? { view, result: details.result } : { view };
}

/**
 * An evaluation: its cases fanned out on the GPU lane, `parallelism` at a time; a benchmark failure
 * is recorded, a transient GPU error retried; then it waits in `awaiting_review` until a listed
 * reviewer approves, and is `published`.
 */
export async function EvalRun(input: EvalRunInput): Promise<EvalStatus> {
  // Runs started before this behaviour keep abandoning their cases at a cancel, so their histories replay.
  const countsCasesFinishedAtCancel = patched('eval-run-counts-cases-finished-at-cancel');
  // Runs started before their state carried the cases' usage keep events of the size they had, so their histories replay.
  const usageInState = patched('eval-run-usage-in-state');
  // Agent cases started before this behaviour spent under their own runs (the org's month alone), so their histories replay.
  const agentCasesUnderBudget = patched('eval-run-agent-cases-under-its-budget');
  const run = new EvalLoopState(input, usageInState);
  const outbox = openOutbox({ org: input.org, run_id: input.run_id, kind: 'eval', lane: input.lanes.agentWorkflows, firstSeq: 0, state: () => run.view(), ...(input.events_via ? { eventsVia: input.events_via } : {}) });
  const setStatus = statusSetter(run, outbox);
  const { runCase, loadAgentCase, scoreAgentCase } = proxyActivities<EvalActivities>({
    taskQueue: input.lanes.gpuEval,
    startToCloseTimeout: '10m',
    // A cancel reaches a case at its next heartbeat.
    heartbeatTimeout: `${input.case_heartbeat_s}s`,
    retry: CASE_RETRY,
    // A case can finish, and record its effect, before it hears of the cancel: the run waits for each
    // case's own answer (its result, or the cancel acknowledged) so that no finished case goes uncounted.
    ...(countsCasesFinishedAtCancel ? { cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED } : {}),
  });
  /** The agent solver: the case's own `AgentRun` (its events, snapshots and workspace), then its scoring. */
  const solveWithAgent = async (request: CaseRequest): Promise<CaseOutcome> => {
    const template = input.agent!;
    const { goal } = await loadAgentCase(request);
    const childRunId = agentCaseRunId(input.run_id, request.case_id);
    const startedAt = Date.now();
    const raisesAtStart = run.budgetRaises;
    const options = {
      workflowId: workflowIdFor(input.org, childRunId),
      taskQueue: input.lanes.agentWorkflows,
      args: [
        {
          ...template,
          org: input.org,
          run_id: childRunId,
          goal,
          parent_run_id: input.run_id,
          seed: { dataset: input.spec!.dataset, case_id: request.case_id },
          ...(agentCasesUnderBudget ? { budget_run_id: input.run_id, ...(run.budget ? { budget: run.budget } : {}) } : {}),
        },
      ] as [AgentRunInput],
    };
    let caseRun: AgentCaseRun;
    try {
      const result = agentCasesUnderBudget ? await runUnderBudget(input, run, options, raisesAtStart) : await executeChild<typeof AgentRun>('AgentRun', options);
      caseRun = { child_run_id: childRunId, status: result.status, ...(result.answer !== undefined ? { answer: result.answer } : {}), ...(result.final_snapshot_id ? { final_snapshot_id: result.final_snapshot_id } : {}) };
    } catch (err) {
      if (isCancellation(err) || !(err instanceof ChildWorkflowFailure)) throw err;
      caseRun = { child_run_id: childRunId, status: 'failed', error: (err.cause?.message ?? err.message).slice(0, 1_000) };
    }
    return scoreAgentCase({ ...request, run: { ...caseRun, duration_ms: Date.now() - startedAt } });
  };

  const fanOut = new CancellationScope();
  registerEvalRunHandlers(input, run, setStatus, fanOut, outbox);

  /**
   * A case whose worst case did not fit the eval's (or its org's) budget: the eval is `paused` with
   * `reason: budget_exhausted` until the budget is raised (or the eval cancelled); every worker of the
   * fan-out waits too, so no further case starts. The case is then tried again.
   */
  let pausedAt: number | undefined;
  const waitForBudget = async (caseId: string, shortfall: BudgetShortfall): Promise<void> => {
    if (pausedAt === undefined) {
      pausedAt = run.budgetRaises;
      setStatus('paused', 'budget_exhausted', { step: run.view().done, case_id: caseId, ...shortfall });
    }
    const raisesAtPause = pausedAt;
    // Not cancellable by the fan-out's scope: a cancel ends the wait through `cancelRequested`, so the
    // cases still in flight are waited for as at any other cancel.
    await CancellationScope.nonCancellable(() => condition(() => run.budgetRaises > raisesAtPause || run.cancelRequested));
    if (pausedAt !== undefined && !run.cancelRequested) {
      pausedAt = undefined;
      setStatus('running');
    }
  };
  // An agent case's run paused on this eval's budget: the eval pauses with it until a raise (which goes
  // on to the case's run). A refusal under limits raised since is not waited on: the raise is on its way.
  setHandler(caseBudgetExhaustedSignal, async ({ case_id, limits, shortfall }) => {
    if (!agentCasesUnderBudget || !sameLimits(limits, run.budget) || run.cancelRequested || isTerminal(run.status)) return;
    await waitForBudget(case_id, shortfall);
  });
  const notPaused = () => CancellationScope.nonCancellable(() => condition(() => pausedAt === undefined || run.cancelRequested));

  const evaluate = async (caseId: string): Promise<void> => {
    let view: CaseView;
    let result: CaseResult | undefined;
    for (;;) {
      run.cases[caseId] = { status: 'running' };
      // A refusal under limits a raise has since replaced is tried again at once, not paused on.
      const raisesAtRequest = run.budgetRaises;
      try {
        const request: CaseRequest = {
          key: `${input.org}/${input.run_id}:${caseId}`,
          org: input.org,
          run_id: input.run_id,
          case_id: caseId,
          fail_fraction: input.fail_fraction,
          ...(input.spec ? { spec: input.spec, max_attempts: CASE_RETRY.maximumAttempts } : {}),
          ...(run.budget ? { budget: run.budget } : {}),
        };
        const outcome = input.spec?.solver.name === 'agent' && input.agent ? await solveWithAgent(request) : await runCase(request);
        view = { status: 'ok', score: outcome.score, attempts: outcome.attempt };
        result = outcome.result;
        break;
      } catch (err) {
        // Once cancelled, a case that ended without a result (cancelled, timed out, a retry refused) did not finish.
        if (countsCasesFinishedAtCancel && run.cancelRequested && !benchmarkFailure(err)) {
          run.cases[caseId] = { status: 'pending' };
          return;
        }
        const shortfall = budgetShortfallOf(err);
        if (shortfall) {
          // Nothing was spent on it: it waits for the budget like the cases not started yet.
          run.cases[caseId] = { status: 'pending' };
          if (run.budgetRaises === raisesAtRequest) await waitForBudget(caseId, shortfall);
          if (run.cancelRequested) return;
          continue;
        }
        ({ view, result } = failedCase(input, err));
        break;
      }
    }
    run.addCaseUsage(result?.usage);
    run.cases[caseId] = view;
    outbox.emit('case_finished', { case_id: caseId, ...view, ...(result ? { result } : {}) });
  };
  // No case starts once the cancel is in, whatever the ones in flight answer.
  const nextCase = (queue: string[]): string | undefined => (countsCasesFinishedAtCancel && run.cancelRequested ? undefined : queue.shift());
  /** The next case once the eval is not paused on its budget (undefined once cancelled or none is left). */
  const nextWhenRunning = async (queue: string[]): Promise<string | undefined> => {
    if (pausedAt !== undefined) await notPaused();
    return nextCase(queue);
  };

  try {
    setStatus('running', 'run_started');
    const queue = [...input.case_ids];
    await fanOut.run(() =>
      Promise.all(
        Array.from({ length: Math.min(input.parallelism, queue.length) }, async () => {
          for (let next = await nextWhenRunning(queue); next !== undefined; next = await nextWhenRunning(queue)) await evaluate(next);
        }),
      ),
    );
    const cancelledDuringCases = countsCasesFinishedAtCancel && run.cancelRequested;
    if (!cancelledDuringCases) {
      setStatus('awaiting_review');
      await condition(() => run.status === 'published' || run.cancelRequested);
    }
    if (run.cancelRequested) setStatus('cancelled', 'run_finished');
    else outbox.emit('run_finished');
  } catch (err) {
    if (run.cancelRequested && isCancellation(err)) {
      run.resetUnfinished();
      setStatus('cancelled', 'run_finished');
    } else if (isCancellation(err)) {
      await CancellationScope.nonCancellable(async () => {
        setStatus('cancelled', 'run_finished');
        await outbox.drain();
      });
      throw err;
    } else {
      run.failure = { reason: 'case_error', message: err instanceof Error ? err.message : String(err) };
      setStatus('failed', 'run_finished');
      await outbox.drain();
      throw ApplicationFailure.nonRetryable(run.failure.message, run.failure.reason);
    }
  }
  await condition(allHandlersFinished);
  await outbox.drain();
  return run.status;
}
