import type { Client } from '@temporalio/client';
import { quotaFor, type Quotas, type RunDefaultsConfig } from '@agentrun/config';
import { TOPICS } from '@agentrun/contracts';
import type { KafkaBus } from '@agentrun/kafka';
import type { ObjectStore } from '@agentrun/archive';
import { BudgetLedger, CommandLedger, EvalStore, ReadModel, SnapshotManifest } from '@agentrun/persistence';
import { DatasetCatalog } from './adapters/dataset-catalog';
import type { DataSource } from 'typeorm';
import { KafkaOutcomePublisher } from './adapters/kafka-outcome-publisher';
import { TemporalRunDirectory } from './adapters/temporal-run-directory';
import { CommandService } from './command.service';
import type { AgentDefaults, EvalDefaults } from './handlers/run-starter';
import type { CommandLedgerPort, OrgBudgetPort, QuotaPort, SnapshotLookupPort } from './ports';

export interface CommandServiceWiring {
  /** Read when a command is handled, so the client may connect after the service is built. */
  temporal: () => Client;
  /** In a process that runs the workflow worker too: a client on its connection for eager starts (see TemporalRunDirectory). */
  localStarts?: () => Client | undefined;
  /** The runs started here put their CPU lane on the workflow's task queue (a process whose workflow worker serves the CPU tools too). */
  cpuToolsOnWorkflowQueue?: boolean;
  dataSource: DataSource;
  bus: KafkaBus;
  topicPrefix: string;
  taskQueuePrefix: string;
  agentDefaults: AgentDefaults;
  evalDefaults: EvalDefaults;
  /** Stored datasets' cases; with it, evals over datasets are served. */
  objectStore?: ObjectStore;
  /** The model endpoint names the eval workers are configured with. */
  modelEndpoints?: readonly string[];
  /** AGENTRUN_QUOTAS: checked at every start. */
  quotas?: Quotas;
}

/** The command service as every entry point (Kafka consumer, HTTP) builds it: ledger in Postgres, outcomes on Kafka. */
export function createCommandService(w: CommandServiceWiring): CommandService {
  // The persistence classes implement the ports as they stand.
  const ledger: CommandLedgerPort = new CommandLedger(w.dataSource);
  const snapshots: SnapshotLookupPort = new SnapshotManifest(w.dataSource);
  const readModel = new ReadModel(w.dataSource);
  const table = w.quotas;
  const quotas: QuotaPort | undefined = table && { limits: (org) => quotaFor(table, org), activeRuns: (org) => readModel.activeRuns(org) };
  const ledgerOfBudgets = new BudgetLedger(w.dataSource);
  const budgets: OrgBudgetPort = { standing: async (org) => (await ledgerOfBudgets.orgBudgets(org))[0] };
  return new CommandService({
    runs: new TemporalRunDirectory(w.temporal, w.localStarts),
    ledger,
    snapshots,
    outcomes: new KafkaOutcomePublisher(w.bus, w.topicPrefix + TOPICS.commandResults),
    taskQueuePrefix: w.taskQueuePrefix,
    ...(w.cpuToolsOnWorkflowQueue ? { cpuToolsOnWorkflowQueue: true } : {}),
    agentDefaults: w.agentDefaults,
    evalDefaults: w.evalDefaults,
    ...(quotas ? { quotas } : {}),
    budgets,
    ...(w.objectStore ? { datasets: new DatasetCatalog(new EvalStore(w.dataSource), w.objectStore, w.modelEndpoints ?? ['default']) } : {}),
  });
}

/** A run's `events_via` from AGENTRUN_RUN_EVENTS_VIA: none for the workflow-task sink (the input's absence says so). */
function eventsViaOf(via: RunDefaultsConfig['AGENTRUN_RUN_EVENTS_VIA']): { events_via?: 'activity' | 'carried' } {
  return via === 'workflow-task' ? {} : { events_via: via };
}

/** The run defaults from a service's configuration. */
export function agentDefaultsOf(config: Pick<RunDefaultsConfig, 'AGENTRUN_STEPS_PER_EXECUTION' | 'AGENTRUN_HISTORY_MAX_EVENTS' | 'AGENTRUN_HISTORY_MAX_BYTES' | 'AGENTRUN_RESEARCH_EVERY' | 'AGENTRUN_TOOL_START_TO_CLOSE_S' | 'AGENTRUN_TOOL_HEARTBEAT_S' | 'AGENTRUN_GPU_SCHEDULE_TO_START_S' | 'AGENTRUN_HOST_SCHEDULE_TO_START_S' | 'AGENTRUN_RECOVERY_EVERY_STEPS' | 'AGENTRUN_RUN_EVENTS_VIA'>): AgentDefaults {
  return {
    steps_per_execution: config.AGENTRUN_STEPS_PER_EXECUTION,
    history_budget: { events: config.AGENTRUN_HISTORY_MAX_EVENTS, bytes: config.AGENTRUN_HISTORY_MAX_BYTES },
    research_every: config.AGENTRUN_RESEARCH_EVERY,
    timeouts: {
      tool_start_to_close_s: config.AGENTRUN_TOOL_START_TO_CLOSE_S,
      tool_heartbeat_s: config.AGENTRUN_TOOL_HEARTBEAT_S,
      gpu_schedule_to_start_s: config.AGENTRUN_GPU_SCHEDULE_TO_START_S,
      host_schedule_to_start_s: config.AGENTRUN_HOST_SCHEDULE_TO_START_S,
    },
    recovery_every_steps: config.AGENTRUN_RECOVERY_EVERY_STEPS,
    ...eventsViaOf(config.AGENTRUN_RUN_EVENTS_VIA),
  };
}

/** The eval defaults from a service's configuration. */
export function evalDefaultsOf(config: Pick<RunDefaultsConfig, 'EVAL_PARALLELISM' | 'AGENTRUN_ERRORED_TURN_UNGRADED' | 'EVAL_CASE_HEARTBEAT_S' | 'AGENTRUN_RUN_EVENTS_VIA'>): EvalDefaults {
  return {
    parallelism: config.EVAL_PARALLELISM,
    errored_ungraded: config.AGENTRUN_ERRORED_TURN_UNGRADED,
    case_heartbeat_s: config.EVAL_CASE_HEARTBEAT_S,
    ...eventsViaOf(config.AGENTRUN_RUN_EVENTS_VIA),
  };
}
