import type { CommandOf, CommandPayloads, CommandType } from '@agentrun/contracts';
import { CommandService } from '../command.service';
import type { AgentDefaults, EvalDefaults } from '../handlers/run-starter';
import type { DatasetCatalogPort, QuotaPort } from '../ports';
import { CapturingOutcomePublisher, FakeRunDirectory, InMemoryCommandLedger, InMemorySnapshotLookup } from './fake-ports';

export const TEST_AGENT_DEFAULTS: AgentDefaults = {
  steps_per_execution: 50,
  history_budget: { events: 10_000, bytes: 10_000_000 },
  research_every: 3,
  timeouts: { tool_start_to_close_s: 30, tool_heartbeat_s: 5, gpu_schedule_to_start_s: 60 },
};

export const TEST_EVAL_DEFAULTS: EvalDefaults = { parallelism: 4, errored_ungraded: true, case_heartbeat_s: 10 };

export const TEST_NOW = new Date('2026-06-01T12:00:00.000Z');

/** A command service over in-memory ports, with each port at hand for the test to arrange and inspect. */
export function serviceWithFakes(taskQueuePrefix = 'unit-', datasets?: DatasetCatalogPort, quotas?: QuotaPort) {
  const ledger = new InMemoryCommandLedger();
  const runs = new FakeRunDirectory();
  const snapshots = new InMemorySnapshotLookup();
  const outcomes = new CapturingOutcomePublisher();
  const service = new CommandService({
    runs,
    ledger,
    snapshots,
    outcomes,
    taskQueuePrefix,
    agentDefaults: TEST_AGENT_DEFAULTS,
    evalDefaults: TEST_EVAL_DEFAULTS,
    now: () => TEST_NOW,
    ...(datasets ? { datasets } : {}),
    ...(quotas ? { quotas } : {}),
  });
  return { service, ledger, runs, snapshots, outcomes };
}

let counter = 0;

/** A command of one type in org `acme`; ids are unique per call unless given. */
export function commandOf<T extends CommandType>(type: T, payload: CommandPayloads[T], ids: Partial<Pick<CommandOf<T>, 'command_id' | 'org' | 'run_id'>> = {}): CommandOf<T> {
  counter += 1;
  return { command_id: `cmd-${counter}`, org: 'acme', run_id: 'run-1', ...ids, type, payload };
}
