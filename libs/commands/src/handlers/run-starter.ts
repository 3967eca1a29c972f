import {
  DEFAULT_MAX_STEPS,
  RUN_ID_PATTERN,
  type AgentPolicy,
  type RejectionReason,
  SNAPSHOT_DEFAULTS,
  type AgentStartPayload,
  type EvalStartPayload,
  type LaneQueues,
  type SnapshotSettings,
} from '@agentrun/contracts';
import { EvalSpecError, normaliseScorers, normaliseSolver } from '@agentrun/evals';
import type { AgentCaseTemplate, AgentRunInput, CaseSpec, EvalRunInput, ForkInput, NamedSpec, SnapshotSeriesConfig, ToolTimeouts } from '@agentrun/workflows';
import { accepted, rejected, type CommandDecision } from '../decision';
import { RunAlreadyStartedError } from '../errors';
import type { CommandLedgerPort, DatasetCatalogPort, QuotaPort, RunDirectoryPort, StartLimits, StartRunRequest } from '../ports';
import { MAX_EVAL_CASES } from '../adapters/dataset-catalog';

/** Why an eval start without reviewers is refused (here, and by the gateway before its ledger). */
export const NO_REVIEWERS = 'an eval needs at least one reviewer: give reviewers ["who", ...] (the subjects of the tokens that may approve it)';

/** How every AgentRun is started: its history budget and research cadence. */
export interface AgentDefaults {
  steps_per_execution: number;
  history_budget: { events: number; bytes: number };
  research_every: number;
  timeouts: ToolTimeouts;
  /** Recovery points of a run without a snapshot series, on a workspace host. */
  recovery_every_steps?: number;
  /** AGENTRUN_RUN_EVENTS_VIA (`carried` by default, or `activity`); absent, the run publishes by the workflow-task sink. */
  events_via?: 'activity' | 'carried';
}

/** How every EvalRun is started. */
export interface EvalDefaults {
  parallelism: number;
  errored_ungraded: boolean;
  case_heartbeat_s: number;
  events_via?: 'activity' | 'carried';
}

/**
 * A run's snapshot settings with the platform's defaults filled in. A default `max_snapshots` above the
 * org's `snapshots_per_run` is lowered to it; an explicit one above it is refused before this (`overQuota`).
 */
export function snapshotConfigOf(settings: SnapshotSettings, snapshotsCap?: number): SnapshotSeriesConfig {
  const fallback = snapshotsCap === undefined ? SNAPSHOT_DEFAULTS.max_snapshots : Math.min(SNAPSHOT_DEFAULTS.max_snapshots, snapshotsCap);
  return {
    interval_seconds: settings.interval_seconds ?? 0,
    per_turn: settings.per_turn ?? SNAPSHOT_DEFAULTS.per_turn,
    at_end: settings.at_end ?? SNAPSHOT_DEFAULTS.at_end,
    timeout_seconds: settings.timeout_seconds ?? SNAPSHOT_DEFAULTS.timeout_seconds,
    max_snapshots: settings.max_snapshots ?? fallback,
  };
}

/**
 * Why a start asks for more than the org may have (`max_steps`, `max_snapshots`), or undefined. Only
 * explicit values are refused: defaults are lowered to the org's limits instead.
 */
function overQuota(org: string, limits: StartLimits, asked: { max_steps?: number; max_snapshots?: number }, what = ''): string | undefined {
  if (asked.max_steps !== undefined && asked.max_steps > limits.max_steps)
    return `${what}max_steps ${asked.max_steps} is over org ${org}'s limit of ${limits.max_steps} (max_steps in AGENTRUN_QUOTAS)`;
  if (asked.max_snapshots !== undefined && asked.max_snapshots > limits.snapshots_per_run)
    return `${what}snapshots.max_snapshots ${asked.max_snapshots} is over org ${org}'s limit of ${limits.snapshots_per_run} snapshots per run (snapshots_per_run in AGENTRUN_QUOTAS)`;
  return undefined;
}

export interface RunStarterDeps {
  runs: RunDirectoryPort;
  ledger: Pick<CommandLedgerPort, 'acceptedStart'>;
  lanes: LaneQueues;
  agentDefaults: AgentDefaults;
  evalDefaults: EvalDefaults;
  /** Real evals' datasets; without it an eval start with a dataset is refused. */
  datasets?: DatasetCatalogPort;
  /** Per-org limits checked at every start; without it, none. */
  quotas?: QuotaPort;
}

/** A finished eval's checked spec, reused as it was by retry-failed (from the run's memo). */
export interface EvalReuse {
  spec: CaseSpec;
  agent?: AgentCaseTemplate;
}

/** What an eval start names beyond the synthetic fields, checked; or why it cannot run. */
type EvalPlan = { case_ids: string[]; suite: string; spec?: CaseSpec; agent?: AgentCaseTemplate } | { refused: string; reason?: RejectionReason };

/** Steps an agent case's run may take unless the solver says otherwise. */
export const DEFAULT_AGENT_CASE_STEPS = 12;
const runIdRe = new RegExp(RUN_ID_PATTERN);

/** Where a fork starts: its parent's snapshot and the step that snapshot was taken at. */
export interface ForkStart {
  input: ForkInput;
  step: number;
}

/** Starts runs with the platform's defaults, each run id at most once per org. */
export class RunStarter {
  constructor(private readonly deps: RunStarterDeps) {}

  /** The task queues an agent run started here uses (its CPU lane is this process's choice: see `CommandService`). */
  private agentLanes(): AgentRunInput['lanes'] {
    const { lanes } = this.deps;
    return { agentWorkflows: lanes.agentWorkflows, cpuTools: lanes.cpuTools, gpuTools: lanes.gpuTools, snapshots: lanes.snapshots };
  }

  async startAgent(commandId: string, org: string, runId: string, settings: AgentStartPayload, fork?: ForkStart): Promise<CommandDecision> {
    const { lanes } = this.deps;
    const limits = this.deps.quotas?.limits(org);
    if (limits) {
      const over = overQuota(org, limits, { max_steps: settings.max_steps, max_snapshots: settings.snapshots?.max_snapshots });
      if (over) return rejected('quota_exceeded', over);
    }
    const input: AgentRunInput = {
      org,
      run_id: runId,
      goal: settings.goal,
      max_steps: settings.max_steps ?? Math.min(DEFAULT_MAX_STEPS, limits?.max_steps ?? DEFAULT_MAX_STEPS),
      policy: settings.policy ?? 'scripted',
      tier: settings.tier ?? 'batch',
      ...(settings.owner ? { owner: settings.owner } : {}),
      ...(fork ? { parent_run_id: fork.input.from_run_id, fork: fork.input } : {}),
      lanes: this.agentLanes(),
      ...(settings.snapshots ? { snapshots: snapshotConfigOf(settings.snapshots, limits?.snapshots_per_run) } : {}),
      ...(settings.budget ? { budget: settings.budget } : {}),
      ...(settings.model ? { model: settings.model } : {}),
      ...this.deps.agentDefaults,
    };
    return this.startOnce({
      org,
      runId,
      commandId,
      taskQueue: lanes.agentWorkflows,
      workflow: { kind: 'agent', input },
      memo: { tier: input.tier, max_steps: input.max_steps, ...(fork ? { parent_run_id: fork.input.from_run_id, forked_from_snapshot: fork.input.snapshot_id } : {}) },
      attributes: {
        current_step: fork?.step ?? 0,
        ...(fork ? { parent_run_id: fork.input.from_run_id } : {}),
        ...(input.owner ? { owner: input.owner } : {}),
      },
    });
  }

  /**
   * Starts an eval. Without a dataset it is the synthetic solver over made-up case ids, as before; with one,
   * the dataset, solver, scorers and endpoint are checked here, so a mistake is refused at the boundary.
   * `spec` (retry-failed) reuses a finished run's checked spec as it was.
   */
  async startEval(commandId: string, org: string, runId: string, payload: EvalStartPayload, parentRunId?: string, reuse?: EvalReuse): Promise<CommandDecision> {
    const { lanes } = this.deps;
    // Approval is the run's only gate, and it is given by a token's subject named here: a run nobody may
    // approve could never be published, and a default list would let whoever holds those names approve.
    const reviewers = payload.reviewers ?? [];
    if (reviewers.length === 0) return rejected('invalid_payload', NO_REVIEWERS);
    // A retry's agent cases take this process's queues, not those of the process that started the eval.
    const again = reuse && (reuse.agent ? { ...reuse, agent: { ...reuse.agent, lanes: this.agentLanes() } } : reuse);
    const plan: EvalPlan = again ? { case_ids: payload.case_ids ?? [], suite: payload.suite ?? again.spec.dataset.name, ...again } : await this.planEval(org, runId, payload);
    if ('refused' in plan) return rejected(plan.reason ?? 'invalid_payload', plan.refused);
    // An eval's agent cases are started by the eval itself, never refused mid-eval: their limits are checked here, once.
    if (plan.agent && !reuse) {
      const limits = this.deps.quotas?.limits(org);
      const over = limits && overQuota(org, limits, { max_steps: plan.agent.max_steps, max_snapshots: plan.agent.snapshots?.max_snapshots }, "the agent solver's ");
      if (over) return rejected('quota_exceeded', over);
    }
    const input: EvalRunInput = {
      org,
      run_id: runId,
      model: payload.model,
      suite: plan.suite,
      case_ids: plan.case_ids,
      fail_fraction: payload.fail_fraction ?? 0.25,
      reviewers,
      lanes: { agentWorkflows: lanes.agentWorkflows, gpuEval: lanes.gpuEval },
      ...(parentRunId ? { parent_run_id: parentRunId } : {}),
      ...this.deps.evalDefaults,
      ...(plan.spec ? { spec: plan.spec } : {}),
      ...(plan.agent ? { agent: plan.agent } : {}),
      ...(payload.budget ? { budget: payload.budget } : {}),
    };
    return this.startOnce({
      org,
      runId,
      commandId,
      taskQueue: lanes.agentWorkflows,
      workflow: { kind: 'eval', input },
      memo: { model: input.model, suite: input.suite, ...(parentRunId ? { parent_run_id: parentRunId } : {}), ...(plan.spec ? { spec: plan.spec } : {}), ...(plan.agent ? { agent: plan.agent } : {}) },
      attributes: parentRunId ? { parent_run_id: parentRunId } : {},
    });
  }

  private async planEval(org: string, runId: string, payload: EvalStartPayload): Promise<EvalPlan> {
    if (!payload.dataset) {
      const solver = payload.solver === undefined ? 'synthetic' : typeof payload.solver === 'string' ? payload.solver : payload.solver.name;
      if (solver !== 'synthetic') return { refused: `the '${solver}' solver needs a dataset: give dataset {"name": ...}, {"id": ...} or {"cases": [...]}` };
      if (payload.scorers) return { refused: 'scorers need a dataset: the synthetic solver draws its own scores' };
      if (payload.suite === undefined) return { refused: 'suite is required without a dataset' };
      const caseIds = payload.case_ids ?? Array.from({ length: payload.cases ?? 0 }, (_, i) => `case-${String(i + 1).padStart(3, '0')}`);
      return { case_ids: caseIds, suite: payload.suite };
    }
    const catalog = this.deps.datasets;
    if (!catalog) return { refused: 'this service takes no datasets' };
    const endpoint = payload.model_endpoint;
    if (endpoint !== undefined && !catalog.modelEndpoints.includes(endpoint)) {
      return { refused: `unknown model endpoint '${endpoint}': the workers have ${catalog.modelEndpoints.join(', ')}`, reason: 'invalid_eval' };
    }
    const dataset = await catalog.resolve(org, payload.dataset);
    if ('reason' in dataset) return { refused: dataset.message, reason: dataset.reason };
    let solver: NamedSpec;
    let scorers: NamedSpec[];
    try {
      solver = normaliseSolver(payload.solver ?? dataset.solver ?? 'generate') as NamedSpec;
      scorers = normaliseScorers(payload.scorers ?? dataset.scorers ?? ['exact']) as NamedSpec[];
    } catch (err) {
      if (err instanceof EvalSpecError) return { refused: err.message, reason: 'invalid_eval' };
      throw err;
    }
    if (solver.name === 'synthetic') return { refused: "the 'synthetic' solver makes up its cases: start it without a dataset", reason: 'invalid_eval' };
    let caseIds = dataset.case_ids;
    if (payload.case_ids) {
      const known = new Set(caseIds);
      const unknown = payload.case_ids.filter((id) => !known.has(id));
      if (unknown.length) return { refused: `dataset '${dataset.ref.name}' has no case ${unknown.slice(0, 5).map((id) => `'${id}'`).join(', ')}${unknown.length > 5 ? ` (and ${unknown.length - 5} more)` : ''}`, reason: 'invalid_eval' };
      caseIds = payload.case_ids;
    } else if (payload.cases) caseIds = caseIds.slice(0, payload.cases);
    if (caseIds.length > MAX_EVAL_CASES) return { refused: `dataset '${dataset.ref.name}' has ${caseIds.length} cases; an eval takes at most ${MAX_EVAL_CASES}: give case_ids or cases`, reason: 'invalid_eval' };
    const spec: CaseSpec = { dataset: dataset.ref, solver, scorers, model: payload.model, ...(endpoint ? { model_endpoint: endpoint } : {}) };
    if (solver.name !== 'agent') return { case_ids: caseIds, suite: payload.suite ?? dataset.ref.name, spec };
    if (endpoint !== undefined && endpoint !== 'default') return { refused: `the 'agent' solver's runs ask the orchestrator's model endpoint; model_endpoint '${endpoint}' applies to 'generate' only`, reason: 'invalid_eval' };
    // Each case's agent is a run of its own: `{eval run id}.{case id}`, which must be a valid run id.
    const tooLong = caseIds.find((id) => !runIdRe.test(`${runId}.${id}`));
    if (tooLong !== undefined) return { refused: `the agent run of case '${tooLong}' would be '${runId}.${tooLong}', longer than a run id may be: use a shorter eval run id`, reason: 'invalid_eval' };
    return { case_ids: caseIds, suite: payload.suite ?? dataset.ref.name, spec, agent: this.agentCaseTemplate(org, payload, solver) };
  }

  /** How each agent case's run is started: the agent defaults, the eval's model, and a snapshot series that always keeps the final workspace. */
  private agentCaseTemplate(org: string, payload: EvalStartPayload, solver: NamedSpec): AgentCaseTemplate {
    const options = solver as NamedSpec & { max_steps?: number; policy?: AgentPolicy };
    const limits = this.deps.quotas?.limits(org);
    return {
      max_steps: options.max_steps ?? Math.min(DEFAULT_AGENT_CASE_STEPS, limits?.max_steps ?? DEFAULT_AGENT_CASE_STEPS),
      policy: options.policy ?? 'llm',
      tier: 'batch',
      lanes: this.agentLanes(),
      ...this.deps.agentDefaults,
      // The scorers read the final workspace from the final snapshot.
      snapshots: snapshotConfigOf({ ...payload.snapshots, at_end: true }, limits?.snapshots_per_run),
      model: payload.model,
    };
  }

  /** The ledger and the run directory both refuse a second run with the same id in an org. */
  private async startOnce(request: StartRunRequest): Promise<CommandDecision> {
    const { org, runId, commandId } = request;
    const exists = rejected('run_exists', `org ${org} already has a run '${runId}'`);
    // Temporal forgets a closed run after its retention; the ledger does not.
    const startedBy = await this.deps.ledger.acceptedStart(org, runId);
    if (startedBy !== undefined && startedBy !== commandId) return exists;
    // A start already accepted (decided again after a crash) is counted among the active runs already.
    if (startedBy === undefined && this.deps.quotas) {
      const limit = this.deps.quotas.limits(org).active_runs;
      const active = await this.deps.quotas.activeRuns(org);
      if (active >= limit) {
        // Our own earlier attempt may have started it before a crash kept the ledger from saying so: it
        // runs, so refusing it now would be a wrong answer. Asked only when refusing, so admission stays one query.
        const run = await this.deps.runs.describe(org, runId);
        if (run?.startCommandId === commandId) return accepted();
        return rejected('quota_exceeded', `org ${org} has ${active} active runs, its limit (active_runs in AGENTRUN_QUOTAS) is ${limit}: start again when one has finished`);
      }
    }
    try {
      await this.deps.runs.start(request);
      return accepted();
    } catch (err) {
      if (!(err instanceof RunAlreadyStartedError)) throw err;
      // Our own earlier attempt may have started it before a crash kept the ledger from saying so.
      const run = await this.deps.runs.describe(org, runId);
      return run?.startCommandId === commandId ? accepted() : exists;
    }
  }
}
