import {
  DEFAULT_MAX_STEPS,
  SNAPSHOT_DEFAULTS,
  type AgentStartPayload,
  type EvalStartPayload,
  type LaneQueues,
  type SnapshotSettings,
} from '@agentrun/contracts';
import type { AgentRunInput, EvalRunInput, ForkInput, SnapshotSeriesConfig, ToolTimeouts } from '@agentrun/workflows';
import { accepted, rejected, type CommandDecision } from '../decision';
import { RunAlreadyStartedError } from '../errors';
import type { CommandLedgerPort, RunDirectoryPort, StartRunRequest } from '../ports';

/** How every AgentRun is started: its history budget and research cadence. */
export interface AgentDefaults {
  steps_per_execution: number;
  history_budget: { events: number; bytes: number };
  research_every: number;
  timeouts: ToolTimeouts;
  /** Recovery points of a run without a snapshot series, on a workspace host. */
  recovery_every_steps?: number;
}

/** How every EvalRun is started. */
export interface EvalDefaults {
  parallelism: number;
  errored_ungraded: boolean;
  case_heartbeat_s: number;
}

/** A run's snapshot settings with the platform's defaults filled in. */
export function snapshotConfigOf(settings: SnapshotSettings): SnapshotSeriesConfig {
  return {
    interval_seconds: settings.interval_seconds ?? 0,
    per_turn: settings.per_turn ?? SNAPSHOT_DEFAULTS.per_turn,
    at_end: settings.at_end ?? SNAPSHOT_DEFAULTS.at_end,
    timeout_seconds: settings.timeout_seconds ?? SNAPSHOT_DEFAULTS.timeout_seconds,
    max_snapshots: settings.max_snapshots ?? SNAPSHOT_DEFAULTS.max_snapshots,
  };
}

export interface RunStarterDeps {
  runs: RunDirectoryPort;
  ledger: Pick<CommandLedgerPort, 'acceptedStart'>;
  lanes: LaneQueues;
  agentDefaults: AgentDefaults;
  evalDefaults: EvalDefaults;
}

/** Where a fork starts: its parent's snapshot and the step that snapshot was taken at. */
export interface ForkStart {
  input: ForkInput;
  step: number;
}

/** Starts runs with the platform's defaults, each run id at most once per org. */
export class RunStarter {
  constructor(private readonly deps: RunStarterDeps) {}

  async startAgent(commandId: string, org: string, runId: string, settings: AgentStartPayload, fork?: ForkStart): Promise<CommandDecision> {
    const { lanes } = this.deps;
    const input: AgentRunInput = {
      org,
      run_id: runId,
      goal: settings.goal,
      max_steps: settings.max_steps ?? DEFAULT_MAX_STEPS,
      policy: settings.policy ?? 'scripted',
      tier: settings.tier ?? 'batch',
      ...(settings.owner ? { owner: settings.owner } : {}),
      ...(fork ? { parent_run_id: fork.input.from_run_id, fork: fork.input } : {}),
      lanes: { agentWorkflows: lanes.agentWorkflows, cpuTools: lanes.cpuTools, gpuTools: lanes.gpuTools, snapshots: lanes.snapshots },
      ...(settings.snapshots ? { snapshots: snapshotConfigOf(settings.snapshots) } : {}),
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

  async startEval(commandId: string, org: string, runId: string, payload: EvalStartPayload, parentRunId?: string): Promise<CommandDecision> {
    const { lanes } = this.deps;
    const caseIds = payload.case_ids ?? Array.from({ length: payload.cases ?? 0 }, (_, i) => `case-${String(i + 1).padStart(3, '0')}`);
    const input: EvalRunInput = {
      org,
      run_id: runId,
      model: payload.model,
      suite: payload.suite,
      case_ids: caseIds,
      fail_fraction: payload.fail_fraction ?? 0.25,
      reviewers: payload.reviewers ?? ['alice', 'bob'],
      lanes: { agentWorkflows: lanes.agentWorkflows, gpuEval: lanes.gpuEval },
      ...(parentRunId ? { parent_run_id: parentRunId } : {}),
      ...this.deps.evalDefaults,
    };
    return this.startOnce({
      org,
      runId,
      commandId,
      taskQueue: lanes.agentWorkflows,
      workflow: { kind: 'eval', input },
      memo: { model: input.model, suite: input.suite, ...(parentRunId ? { parent_run_id: parentRunId } : {}) },
      attributes: parentRunId ? { parent_run_id: parentRunId } : {},
    });
  }

  /** The ledger and the run directory both refuse a second run with the same id in an org. */
  private async startOnce(request: StartRunRequest): Promise<CommandDecision> {
    const { org, runId, commandId } = request;
    const exists = rejected('run_exists', `org ${org} already has a run '${runId}'`);
    // Temporal forgets a closed run after its retention; the ledger does not.
    const startedBy = await this.deps.ledger.acceptedStart(org, runId);
    if (startedBy !== undefined && startedBy !== commandId) return exists;
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
