import type { EvalStatus, RunBudget, RunUsage } from '@agentrun/contracts';
import type { CaseView, EvalRunInput, EvalRunState } from './eval-run.types';
import { addUsage } from './agent-run.state';

/** What `EvalRun` knows about its run: the status, each case's result, the commands already applied. */
export class EvalLoopState {
  status: EvalStatus = 'queued';
  approvedBy: string | undefined;
  cancelRequested = false;
  failure: { reason: string; message: string } | undefined;
  readonly processed = new Set<string>();
  readonly cases: Record<string, CaseView>;
  /** The limits each case is reserved against: as started, then as raised. */
  budget: RunBudget | undefined;
  /** How many times the budget was raised: a pause on the budget waits for the next raise. */
  budgetRaises = 0;
  /** The cases' model calls added up (`calls` counts cases that used the model). */
  usage: RunUsage | undefined;

  constructor(
    private readonly input: EvalRunInput,
    /** Whether the state carries the cases' usage (runs started before it did not). */
    private readonly countsUsage = true,
  ) {
    this.cases = Object.fromEntries(input.case_ids.map((id) => [id, { status: 'pending' } satisfies CaseView]));
    this.budget = input.budget;
  }

  /** Adds a case's tokens and cost. */
  addCaseUsage(usage: { prompt_tokens: number; completion_tokens: number; cost_usd?: number } | undefined): void {
    if (!usage || !this.countsUsage) return;
    this.usage = addUsage(this.usage, { model: this.input.model, prompt_tokens: usage.prompt_tokens, completion_tokens: usage.completion_tokens, cost_usd: usage.cost_usd ?? 0, priced: usage.cost_usd !== undefined });
  }

  /** A cooperatively cancelled run leaves the cases it did not finish pending. */
  resetUnfinished(): void {
    for (const [id, view] of Object.entries(this.cases)) if (view.status === 'running' || view.status === 'pending') this.cases[id] = { status: 'pending' };
  }

  /** The state every run event carries. */
  view(): EvalRunState {
    const { input, approvedBy, failure } = this;
    return {
      status: this.status,
      model: input.model,
      suite: input.suite,
      ...(input.spec ? { dataset_id: input.spec.dataset.id, solver: input.spec.solver.name } : {}),
      total: input.case_ids.length,
      ...this.tally(),
      cases: this.cases,
      reviewers: input.reviewers,
      ...(approvedBy ? { approved_by: approvedBy } : {}),
      ...(input.parent_run_id ? { parent_run_id: input.parent_run_id } : {}),
      ...(failure ? { reason: failure.reason, message: failure.message } : this.status === 'paused' ? { reason: 'budget_exhausted' } : {}),
      ...(this.budget ? { budget: this.budget } : {}),
      ...(this.usage ? { usage: this.usage } : {}),
    };
  }

  /** Counts by outcome, and the mean score over graded cases (ok and failed); ungraded cases are left out. */
  private tally(): Pick<EvalRunState, 'done' | 'counts' | 'score'> {
    const views = Object.values(this.cases);
    const ok = views.filter((c) => c.status === 'ok');
    const failed = views.filter((c) => c.status === 'failed');
    const graded = [...ok, ...failed];
    return {
      done: ok.length + failed.length + views.filter((c) => c.status === 'ungraded').length,
      counts: { ok: ok.length, failed: failed.length, ungraded: views.filter((c) => c.status === 'ungraded').length },
      score: graded.length ? Math.round((graded.reduce((sum, c) => sum + (c.score ?? 0), 0) / graded.length) * 1000) / 1000 : null,
    };
  }
}
