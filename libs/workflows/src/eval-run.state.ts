import type { EvalStatus } from '@agentrun/contracts';
import type { CaseView, EvalRunInput, EvalRunState } from './eval-run.types';

/** What `EvalRun` knows about its run: the status, each case's result, the commands already applied. */
export class EvalLoopState {
  status: EvalStatus = 'queued';
  approvedBy: string | undefined;
  cancelRequested = false;
  failure: { reason: string; message: string } | undefined;
  readonly processed = new Set<string>();
  readonly cases: Record<string, CaseView>;

  constructor(private readonly input: EvalRunInput) {
    this.cases = Object.fromEntries(input.case_ids.map((id) => [id, { status: 'pending' } satisfies CaseView]));
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
      ...(failure ? { reason: failure.reason, message: failure.message } : {}),
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
