import type { CommandOutcome, RunKind, SnapshotRow } from '@agentrun/contracts';
import type { EvalRunState } from '@agentrun/workflows';
import { RunAlreadyStartedError, RunNotFoundError, UpdateRefusedError } from '../errors';
import type {
  CommandLedgerPort,
  LedgerClaim,
  LedgerDecision,
  OutcomePublisherPort,
  RunDirectoryPort,
  RunSignal,
  RunUpdate,
  RunView,
  SnapshotLookupPort,
  StartRunRequest,
} from '../ports';

// In-memory stand-ins for the ports, for unit tests of the handlers and the service.

interface LedgerEntry {
  type: string;
  run_id: string;
  source: string | null;
  decided?: LedgerDecision;
  /** Another handler holds the claim. */
  held: boolean;
}

export class InMemoryCommandLedger implements CommandLedgerPort {
  readonly entries = new Map<string, LedgerEntry>();
  readonly released: string[] = [];

  async claim(org: string, commandId: string, type: string, runId: string, source: string | null): Promise<LedgerClaim> {
    const key = `${org}/${commandId}`;
    const entry = this.entries.get(key);
    if (entry === undefined) {
      this.entries.set(key, { type, run_id: runId, source, held: true });
      return { state: 'claimed' };
    }
    if (entry.decided) return { state: 'decided', decided: entry.decided };
    if (entry.held) return { state: 'busy' };
    entry.held = true;
    return { state: 'claimed' };
  }

  async release(org: string, commandId: string): Promise<void> {
    const entry = this.entries.get(`${org}/${commandId}`);
    if (entry && !entry.decided) entry.held = false;
    this.released.push(`${org}/${commandId}`);
  }

  async decide(outcome: CommandOutcome): Promise<void> {
    const entry = this.entries.get(`${outcome.org}/${outcome.command_id}`);
    if (!entry || entry.decided) return;
    entry.decided = { outcome: outcome.outcome, reason: outcome.reason ?? null, message: outcome.message ?? null, source: entry.source, decided_at: new Date(outcome.ts) };
  }

  async recordStart(org: string, commandId: string, runId: string): Promise<void> {
    this.accept(org, `${commandId}#start`, 'eval.start', runId);
  }

  async acceptedStart(org: string, runId: string): Promise<string | undefined> {
    for (const [key, entry] of this.entries) {
      const [entryOrg, commandId] = [key.slice(0, key.indexOf('/')), key.slice(key.indexOf('/') + 1)];
      const starts = entry.type.endsWith('.start') || entry.type === 'agent.fork';
      if (entryOrg === org && entry.run_id === runId && starts && entry.decided?.outcome === 'accepted') return commandId;
    }
    return undefined;
  }

  /** A command some earlier handler accepted. */
  accept(org: string, commandId: string, type: string, runId: string, source: string | null = null): void {
    this.entries.set(`${org}/${commandId}`, {
      type,
      run_id: runId,
      source,
      held: false,
      decided: { outcome: 'accepted', reason: null, message: null, source, decided_at: new Date('2026-01-01T00:00:00Z') },
    });
  }

  /** A command another handler is deciding right now. */
  hold(org: string, commandId: string, type: string, runId: string): void {
    this.entries.set(`${org}/${commandId}`, { type, run_id: runId, source: null, held: true });
  }
}

export interface FakeRun {
  kind: RunKind | undefined;
  execution: string;
  status?: string;
  startCommandId?: string;
  memo: Record<string, unknown>;
  evalState?: EvalRunState;
}

type DirectoryCall =
  | { method: 'start'; request: StartRunRequest }
  | { method: 'describe'; org: string; runId: string }
  | { method: 'signal'; org: string; runId: string; signal: RunSignal }
  | { method: 'update'; org: string; runId: string; update: RunUpdate }
  | { method: 'evalStatus'; org: string; runId: string };

/** Runs by `{org}/{run_id}`; records every call and throws what a test told it to. */
export class FakeRunDirectory implements RunDirectoryPort {
  readonly runs = new Map<string, FakeRun>();
  readonly calls: DirectoryCall[] = [];
  /** The next call of that method throws this error instead. */
  private readonly failures = new Map<DirectoryCall['method'], Error>();
  /** Set: every update is refused by the run's validator with this message. */
  refuseUpdates?: string;
  /** A signal or update finds the run already gone (it closed after the look-up). */
  closesBeforeDelivery = false;

  add(org: string, runId: string, run: Partial<FakeRun> & Pick<FakeRun, 'kind'>): FakeRun {
    const full: FakeRun = { execution: 'running', memo: {}, ...run };
    this.runs.set(`${org}/${runId}`, full);
    return full;
  }

  failNext(method: DirectoryCall['method'], error: Error): void {
    this.failures.set(method, error);
  }

  started(): StartRunRequest[] {
    return this.calls.flatMap((c) => (c.method === 'start' ? [c.request] : []));
  }

  sent(): (RunSignal | RunUpdate)[] {
    return this.calls.flatMap<RunSignal | RunUpdate>((c) => (c.method === 'signal' ? [c.signal] : c.method === 'update' ? [c.update] : []));
  }

  async start(request: StartRunRequest): Promise<void> {
    this.record({ method: 'start', request });
    const id = `${request.org}/${request.runId}`;
    if (this.runs.has(id)) throw new RunAlreadyStartedError(`workflow ${id} already started`);
    this.runs.set(id, { kind: request.workflow.kind, execution: 'running', status: 'queued', startCommandId: request.commandId, memo: request.memo });
  }

  async describe(org: string, runId: string): Promise<RunView | undefined> {
    this.record({ method: 'describe', org, runId });
    const run = this.runs.get(`${org}/${runId}`);
    return run && { kind: run.kind, execution: run.execution, status: run.status, startCommandId: run.startCommandId, memo: run.memo };
  }

  async signal(org: string, runId: string, signal: RunSignal): Promise<void> {
    this.record({ method: 'signal', org, runId, signal });
    this.reachable(org, runId);
  }

  async update(org: string, runId: string, update: RunUpdate): Promise<string> {
    this.record({ method: 'update', org, runId, update });
    this.reachable(org, runId);
    if (this.refuseUpdates !== undefined) throw new UpdateRefusedError(this.refuseUpdates);
    return `${update.name} applied`;
  }

  async evalStatus(org: string, runId: string): Promise<EvalRunState> {
    this.record({ method: 'evalStatus', org, runId });
    const state = this.runs.get(`${org}/${runId}`)?.evalState;
    if (!state) throw new RunNotFoundError(`no eval state for ${org}/${runId}`);
    return state;
  }

  private record(call: DirectoryCall): void {
    this.calls.push(call);
    const failure = this.failures.get(call.method);
    if (failure) {
      this.failures.delete(call.method);
      throw failure;
    }
  }

  private reachable(org: string, runId: string): void {
    const run = this.runs.get(`${org}/${runId}`);
    if (!run || run.execution !== 'running' || this.closesBeforeDelivery) throw new RunNotFoundError(`workflow ${org}/${runId} not found`);
  }
}

export class InMemorySnapshotLookup implements SnapshotLookupPort {
  readonly kinds = new Map<string, string>();
  readonly snapshots = new Map<string, { row: SnapshotRow; state: Record<string, unknown> | null }>();

  addRun(org: string, runId: string, kind: string): void {
    this.kinds.set(`${org}/${runId}`, kind);
  }

  addSnapshot(org: string, runId: string, row: SnapshotRow, state: Record<string, unknown> | null): void {
    this.snapshots.set(`${org}/${runId}/${row.snapshot_id}`, { row, state });
  }

  async runKind(org: string, runId: string): Promise<string | undefined> {
    return this.kinds.get(`${org}/${runId}`);
  }

  async find(org: string, runId: string, snapshotId: string): Promise<{ row: SnapshotRow; state: Record<string, unknown> | null } | undefined> {
    return this.snapshots.get(`${org}/${runId}/${snapshotId}`);
  }
}

export class CapturingOutcomePublisher implements OutcomePublisherPort {
  readonly published: CommandOutcome[] = [];

  async publish(outcome: CommandOutcome): Promise<void> {
    this.published.push(outcome);
  }
}
