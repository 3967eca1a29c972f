import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { createHash } from 'node:crypto';
import type { EffectLedger } from '@agentrun/persistence';
import type { ObjectStore } from '@agentrun/archive';
import { agentCaseGoal, caseWorstCase, runGenerateCase, scoreAgentCaseRun, type RealCaseDeps } from './eval-cases';
import { budgetMessage } from './agent.activities';
import { BUDGET_EXHAUSTED, CASE_ERROR_TYPES, type CaseErrorType, type CaseOutcome, type CaseRequest, type CaseSpec, type EvalActivities } from '@agentrun/workflows';

export interface EvalActivityDeps {
  effects: EffectLedger;
  /** Real solvers (cases with a `spec`); without it such a case fails the activity. */
  real?: RealCaseDeps & { store: ObjectStore };
  /** A case's GPU time: this many heartbeating ticks of `tickMs`. */
  ticks: number;
  tickMs: number;
  /** Chance of a transient GPU error per attempt (retried by policy; shows only as attempts). */
  hiccupFraction: number;
}

/** A reproducible number in [0, 1) for a seed: the same run and case roll the same, a retry run rolls again. */
export function roll(seed: string): number {
  return createHash('sha256').update(seed).digest().readUInt32BE(0) / 2 ** 32;
}

function nonRetryable(message: string): never {
  throw ApplicationFailure.nonRetryable(message, 'BadArguments');
}

function caseFailed(outcome: CaseOutcome): never {
  throw ApplicationFailure.create({
    message: `case ${outcome.case_id} failed the benchmark (${outcome.error_type})${outcome.result?.error ? `: ${outcome.result.error}` : ''}`,
    type: 'CaseFailed',
    nonRetryable: true,
    // The workflow reads the error type, and for real solvers what the case said and when.
    details: [{ error_type: outcome.error_type, ...(outcome.result ? { result: outcome.result, attempt: outcome.attempt } : {}) }],
  });
}

/**
 * A `generate` case within its eval's budget: its worst case (its calls' prompts and limits, see
 * `caseWorstCase`) is reserved first, keyed by the case, so a retry finds it; a case that does not fit
 * fails as `BudgetExhausted` (not retried) and its eval waits for a raise. Afterwards the reservation
 * settles to what the case's calls used.
 */
async function generateWithinBudget(real: RealCaseDeps, request: CaseRequest & { spec: CaseSpec }): Promise<CaseOutcome> {
  if (real.budgets) {
    const evalCase = await real.cases.load(request.org, request.spec.dataset, request.case_id);
    const worst = caseWorstCase(request.spec, evalCase, real.maxTokens, real.prices);
    const reserved = await real.budgets.reserve({ key: request.key, org: request.org, run_id: request.run_id, ...worst }, request.budget ?? {});
    if (!reserved.ok) throw ApplicationFailure.create({ message: `case ${request.case_id}: ${budgetMessage(reserved.shortfall)}`, type: BUDGET_EXHAUSTED, nonRetryable: true, details: [reserved.shortfall] });
  }
  let outcome: CaseOutcome;
  try {
    outcome = await runGenerateCase(real, request);
  } catch (err) {
    // A case cancelled, or failing on its last attempt, will not run again: it frees what it held.
    // One that will be retried keeps it, and finds it again.
    const ctx = Context.current();
    if (ctx.cancellationSignal.aborted || ctx.info.attempt >= (request.max_attempts ?? 1)) await real.budgets?.release(request.key);
    throw err;
  }
  const usage = outcome.result?.usage;
  await real.budgets?.settle(request.key, usage ? usage.prompt_tokens + usage.completion_tokens : 0, usage?.cost_usd ?? 0);
  return outcome;
}

export function createEvalActivities(deps: EvalActivityDeps): EvalActivities {
  const realDeps = () => deps.real ?? nonRetryable('this worker runs no real eval solvers');
  const specOf = (request: CaseRequest) => request.spec ?? nonRetryable(`case ${request.case_id} has no eval spec: only real solvers run agents`);
  /** Records a case's outcome once (a retry after a lost completion gets the recorded one) and answers with it. */
  const settle = async (outcome: CaseOutcome, attempt: number): Promise<CaseOutcome> => {
    // A case that has heard of a cancel bills nothing; one that has not yet heard is counted by the run, which waits for its answer.
    Context.current().cancellationSignal.throwIfAborted();
    const stored = await deps.effects.record(outcome.key, 'eval_case', outcome, attempt);
    const result = stored.duplicate ? { ...stored.result, attempt, duplicate: true } : stored.result;
    return result.ok ? result : caseFailed(result);
  };
  /** A case already recorded (a retry after a lost completion) answers from the ledger and runs nothing. */
  const recorded = async (key: string): Promise<CaseOutcome | undefined> => {
    const found = await deps.effects.find<CaseOutcome>(key);
    if (!found) return undefined;
    const outcome = { ...found.result, attempt: Context.current().info.attempt, duplicate: true };
    return outcome.ok ? outcome : caseFailed(outcome);
  };
  return {
    async loadAgentCase(request) {
      return agentCaseGoal(realDeps(), { ...request, spec: specOf(request) });
    },

    /** Idempotent like runCase: the ledger answers a retry after a lost completion. */
    async scoreAgentCase(request) {
      const replayed = await recorded(request.key);
      if (replayed) return replayed;
      const real = realDeps();
      return settle(await scoreAgentCaseRun(real, real.store, { ...request, spec: specOf(request) }), Context.current().info.attempt);
    },

    /**
     * One benchmark case on the GPU lane. Heartbeats each tick (a cancel is seen at the next one;
     * a retry resumes after the last tick), and is idempotent by `run:case` through the ledger:
     * a retry after a lost completion returns the recorded result and runs nothing.
     */
    async runCase(request: CaseRequest): Promise<CaseOutcome> {
      const ctx = Context.current();
      const { attempt } = ctx.info;
      const replayed = await recorded(request.key);
      if (replayed) return replayed;
      if (request.spec) return settle(await generateWithinBudget(realDeps(), { ...request, spec: request.spec }), attempt);
      // Synthetic: seeded by run and case, not by org: a run reproduces itself, a retry run rolls again.
      const seed = `${request.run_id}:${request.case_id}`;
      if (roll(`${seed}:attempt${attempt}`) < deps.hiccupFraction) {
        throw ApplicationFailure.retryable(`transient GPU error on ${request.case_id} (attempt ${attempt})`, 'GpuHiccup');
      }
      const details = ctx.info.heartbeatDetails as { tick?: unknown } | undefined;
      const from = typeof details?.tick === 'number' ? details.tick : 0;
      for (let tick = from; tick < deps.ticks; tick++) {
        ctx.heartbeat({ tick: tick + 1, of: deps.ticks });
        await ctx.sleep(deps.tickMs);
      }
      ctx.heartbeat({ tick: deps.ticks, of: deps.ticks });
      const ok = roll(seed) >= request.fail_fraction;
      const errorType: CaseErrorType = CASE_ERROR_TYPES[Math.floor(roll(`${seed}:error`) * CASE_ERROR_TYPES.length)];
      const outcome: CaseOutcome = {
        key: request.key,
        case_id: request.case_id,
        ok,
        score: ok ? Math.round((0.5 + roll(`${seed}:score`) / 2) * 1000) / 1000 : 0,
        attempt,
        duplicate: false,
        ...(ok ? {} : { error_type: errorType }),
      };
      return settle(outcome, attempt);
    },
  };
}
