import { RUN_ID_PATTERN } from '@agentrun/contracts';
import type { AgentCaseTemplate, CaseSpec } from '@agentrun/workflows';
import { accepted, rejected } from '../decision';
import type { CommandLedgerPort, RunDirectoryPort } from '../ports';
import type { CommandHandler } from './command-handler';
import { findRun, isDecision } from './run-access';
import type { RunStarter } from './run-starter';

const FINISHED = ['awaiting_review', 'published', 'cancelled', 'failed'];
const MAX_RETRIES = 100;
const runIdRe = new RegExp(RUN_ID_PATTERN);

export interface EvalRetryFailedDeps {
  runs: RunDirectoryPort;
  ledger: Pick<CommandLedgerPort, 'acceptedStart' | 'recordStart'>;
  starter: RunStarter;
}

/** A new run `{id}-retry-{n}` over the failed and ungraded cases of a finished eval run. */
export function evalRetryFailedHandler({ runs, ledger, starter }: EvalRetryFailedDeps): CommandHandler<'eval.retry_failed'> {
  return async (command) => {
    const { org, run_id: runId, command_id: commandId } = command;
    const run = await findRun(runs, command, 'eval');
    if (isDecision(run)) return run;
    const state = await runs.evalStatus(org, runId);
    if (!FINISHED.includes(state.status)) {
      return rejected('run_active', `run '${runId}' is still ${state.status}; retry its failed cases when it has finished`);
    }
    const retry = Object.entries(state.cases)
      .filter(([, c]) => c.status === 'failed' || c.status === 'ungraded')
      .map(([id]) => id);
    if (retry.length === 0) return rejected('nothing_to_retry', `run '${runId}' has no failed or ungraded cases`);
    const memo = run.memo as { model?: string; suite?: string; spec?: CaseSpec; agent?: AgentCaseTemplate };
    for (let n = 1; n <= MAX_RETRIES; n++) {
      const retryId = `${runId}-retry-${n}`;
      if ((await ledger.acceptedStart(org, retryId)) !== undefined) continue;
      if (!runIdRe.test(retryId)) break;
      const decision = await starter.startEval(
        commandId,
        org,
        retryId,
        { model: memo.model ?? state.model, suite: memo.suite ?? state.suite, case_ids: retry, reviewers: state.reviewers },
        runId,
        memo.spec ? { spec: memo.spec, ...(memo.agent ? { agent: memo.agent } : {}) } : undefined,
      );
      if (decision.outcome === 'accepted') {
        await ledger.recordStart(org, commandId, retryId);
        return accepted(`started ${retryId} over ${retry.length} cases: ${retry.join(', ')}`);
      }
      if (decision.reason !== 'run_exists') return decision;
    }
    return rejected('invalid_payload', `no free retry id for run '${runId}'`);
  };
}
