import type { Client } from '@temporalio/client';
import type { PlatformConfig } from '@agentrun/config';
import { TOPICS } from '@agentrun/contracts';
import type { KafkaBus } from '@agentrun/kafka';
import { CommandLedger, SnapshotManifest } from '@agentrun/persistence';
import type { DataSource } from 'typeorm';
import { CommandService, type AgentDefaults, type EvalDefaults } from './command.service';

export interface CommandServiceWiring {
  /** Read when a command is handled, so the client may connect after the service is built. */
  temporal: () => Client;
  dataSource: DataSource;
  bus: KafkaBus;
  topicPrefix: string;
  taskQueuePrefix: string;
  agentDefaults: AgentDefaults;
  evalDefaults: EvalDefaults;
}

/** The command service as every entry point (Kafka consumer, HTTP) builds it: ledger in Postgres, outcomes on Kafka. */
export function createCommandService(w: CommandServiceWiring): CommandService {
  const outcomes = w.topicPrefix + TOPICS.commandResults;
  return new CommandService({
    get temporal() {
      return w.temporal();
    },
    ledger: new CommandLedger(w.dataSource),
    snapshots: new SnapshotManifest(w.dataSource),
    taskQueuePrefix: w.taskQueuePrefix,
    agentDefaults: w.agentDefaults,
    evalDefaults: w.evalDefaults,
    publishOutcome: (outcome) => w.bus.send(outcomes, [{ key: outcome.run_id, value: JSON.stringify(outcome) }]),
  });
}

/** The run defaults from a service's configuration. */
export function agentDefaultsOf(config: Pick<PlatformConfig, 'AGENTRUN_STEPS_PER_EXECUTION' | 'AGENTRUN_HISTORY_MAX_EVENTS' | 'AGENTRUN_HISTORY_MAX_BYTES' | 'AGENTRUN_RESEARCH_EVERY' | 'AGENTRUN_TOOL_START_TO_CLOSE_S' | 'AGENTRUN_TOOL_HEARTBEAT_S' | 'AGENTRUN_GPU_SCHEDULE_TO_START_S'>): AgentDefaults {
  return {
    steps_per_execution: config.AGENTRUN_STEPS_PER_EXECUTION,
    history_budget: { events: config.AGENTRUN_HISTORY_MAX_EVENTS, bytes: config.AGENTRUN_HISTORY_MAX_BYTES },
    research_every: config.AGENTRUN_RESEARCH_EVERY,
    timeouts: {
      tool_start_to_close_s: config.AGENTRUN_TOOL_START_TO_CLOSE_S,
      tool_heartbeat_s: config.AGENTRUN_TOOL_HEARTBEAT_S,
      gpu_schedule_to_start_s: config.AGENTRUN_GPU_SCHEDULE_TO_START_S,
    },
  };
}

/** The eval defaults from a service's configuration. */
export function evalDefaultsOf(config: Pick<PlatformConfig, 'EVAL_PARALLELISM' | 'AGENTRUN_ERRORED_TURN_UNGRADED' | 'EVAL_CASE_HEARTBEAT_S'>): EvalDefaults {
  return { parallelism: config.EVAL_PARALLELISM, errored_ungraded: config.AGENTRUN_ERRORED_TURN_UNGRADED, case_heartbeat_s: config.EVAL_CASE_HEARTBEAT_S };
}
