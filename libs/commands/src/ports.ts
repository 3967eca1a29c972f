import type { CommandOutcome, EvalStartPayload, Outcome, RunKind, SnapshotRow } from '@agentrun/contracts';
import type { AgentRunInput, EvalDatasetRef, EvalRunInput, EvalRunState, NamedSpec } from '@agentrun/workflows';

/** A command id's first decision, as the ledger stored it. */
export interface LedgerDecision {
  outcome: Outcome;
  reason: string | null;
  message: string | null;
  /** The Kafka message (topic/partition/offset) it was decided for, or null for HTTP. */
  source: string | null;
  decided_at: Date;
}

export type LedgerClaim =
  /** Ours to decide: never seen, or left undecided by a handler whose lease ran out. */
  | { state: 'claimed' }
  | { state: 'decided'; decided: LedgerDecision }
  /** Another handler is deciding it right now. */
  | { state: 'busy' };

/** One decision per command id in an org; it also remembers which command started each run. */
export interface CommandLedgerPort {
  claim(org: string, commandId: string, type: string, runId: string, source: string | null): Promise<LedgerClaim>;
  /** Gives a claim up undecided, so a retry may take it at once. */
  release(org: string, commandId: string): Promise<void>;
  decide(outcome: CommandOutcome): Promise<void>;
  /** Marks a run started on behalf of another command (retry-failed) as taken, like a start command. */
  recordStart(org: string, commandId: string, runId: string): Promise<void>;
  /** The command id of the accepted start of this run, if it ever had one. */
  acceptedStart(org: string, runId: string): Promise<string | undefined>;
}

/** What the run directory shows of one run. */
export interface RunView {
  /** Undefined for a workflow that is not a run (a research child, say). */
  kind: RunKind | undefined;
  /** The workflow's own status: `running`, `completed`, `cancelled`, ... */
  execution: string;
  /** The run's status as it last published it (the `AgentStatus` attribute). */
  status: string | undefined;
  /** The command that started it. */
  startCommandId: string | undefined;
  memo: Record<string, unknown>;
}

export type RunWorkflow = { kind: 'agent'; input: AgentRunInput } | { kind: 'eval'; input: EvalRunInput };

export interface StartRunRequest {
  org: string;
  runId: string;
  commandId: string;
  taskQueue: string;
  workflow: RunWorkflow;
  memo: Record<string, unknown>;
  /** Search attributes beyond org, kind and the initial status. */
  attributes: { current_step?: number; parent_run_id?: string; owner?: string };
}

export type RunSignal =
  | { name: 'pause' | 'resume' | 'cancel_run' | 'cancel_eval'; command_id: string }
  | { name: 'inject_context'; command_id: string; text: string };

export type RunUpdate =
  | { name: 'change_goal'; command_id: string; goal: string }
  | { name: 'approve'; command_id: string; reviewer: string }
  | { name: 'raise_budget'; command_id: string; max_tokens?: number; max_cost_usd?: number };

/** An org's monthly budget and this month's spend (settled) and reservations (in flight), in US dollars. */
export interface OrgBudgetPort {
  standing(org: string): Promise<{ monthly_usd: number; spent_usd: number; reserved_usd: number } | undefined>;
}

/**
 * Where runs live (Temporal). Every method throws `TransientCommandError` when the directory is out
 * of reach, so nothing is decided on a guess.
 */
export interface RunDirectoryPort {
  /** Throws `RunAlreadyStartedError` when the id is taken, even by a closed run. */
  start(request: StartRunRequest): Promise<void>;
  /** Undefined when there is no such run. */
  describe(org: string, runId: string): Promise<RunView | undefined>;
  /** Throws `RunNotFoundError` when the run has closed or never was. */
  signal(org: string, runId: string, signal: RunSignal): Promise<void>;
  /** The update's answer. Throws `UpdateRefusedError` when its validator refuses, `RunNotFoundError` as `signal`. */
  update(org: string, runId: string, update: RunUpdate): Promise<string>;
  evalStatus(org: string, runId: string): Promise<EvalRunState>;
}

/** The snapshot manifest, the authority on what a fork may start from. */
export interface SnapshotLookupPort {
  /** The kind of a run the org has had, whether or not Temporal still remembers it. */
  runKind(org: string, runId: string): Promise<string | undefined>;
  /** A snapshot row with the run's state as its event showed it. */
  find(org: string, runId: string, snapshotId: string): Promise<{ row: SnapshotRow; state: Record<string, unknown> | null } | undefined>;
}

/** Publishes outcome records; resolves once the record is durable. */
export interface OutcomePublisherPort {
  publish(outcome: CommandOutcome): Promise<void>;
}

/** A start's dataset, resolved: its reference for the workers, its case ids, and a shipped suite's defaults. */
export interface ResolvedDataset {
  ref: EvalDatasetRef;
  case_ids: string[];
  solver?: string;
  scorers?: NamedSpec[];
}

/** A dataset the org does not have, or inline cases a schema could not refuse (ids used twice, sizes). */
export interface DatasetRefusal {
  reason: 'unknown_dataset' | 'invalid_eval';
  message: string;
}

/** Where eval datasets are found: shipped suites, stored datasets, and inline cases (stored on the way). */
export interface DatasetCatalogPort {
  /** The dataset, or why it cannot be used (said to the sender as it is). */
  resolve(org: string, dataset: NonNullable<EvalStartPayload['dataset']>): Promise<ResolvedDataset | DatasetRefusal>;
  /** The model endpoints the workers are configured with. */
  readonly modelEndpoints: readonly string[];
}

/** The limits a start is checked against (a subset of AGENTRUN_QUOTAS, for one org). */
export interface StartLimits {
  active_runs: number;
  max_steps: number;
  snapshots_per_run: number;
}

/** Per-org quotas at the start of a run: the org's limits and how many runs it holds now. */
export interface QuotaPort {
  limits(org: string): StartLimits;
  /** The org's runs not yet terminal (read model), starts not yet projected included. */
  activeRuns(org: string): Promise<number>;
}

/** A command key as the verifier sees it: whose it is, what was issued, and whether it still counts. */
export interface CommandKeyView {
  /** Normalised (lowercase). */
  org: string;
  /** SHA-256 (hex) of the key as issued. */
  key_hash: string;
  revoked: boolean;
}

/** The issued command keys (Postgres). Throws when out of reach, so a command is never refused on a guess. */
export interface CommandKeyLookupPort {
  /** Undefined for an id never issued. */
  find(keyId: string): Promise<CommandKeyView | undefined>;
}
