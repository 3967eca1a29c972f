import type { Client } from '@temporalio/client';
import { TOPICS } from '@agentrun/contracts';
import type { KafkaBus } from '@agentrun/kafka';
import { CommandLedger } from '@agentrun/persistence';
import type { DataSource } from 'typeorm';
import { CommandService } from './command.service';

export interface CommandServiceWiring {
  /** Read when a command is handled, so the client may connect after the service is built. */
  temporal: () => Client;
  dataSource: DataSource;
  bus: KafkaBus;
  topicPrefix: string;
  taskQueuePrefix: string;
  stepsPerExecution: number;
}

/** The command service as every entry point (Kafka consumer, HTTP) builds it: ledger in Postgres, outcomes on Kafka. */
export function createCommandService(w: CommandServiceWiring): CommandService {
  const outcomes = w.topicPrefix + TOPICS.commandResults;
  return new CommandService({
    get temporal() {
      return w.temporal();
    },
    ledger: new CommandLedger(w.dataSource),
    taskQueuePrefix: w.taskQueuePrefix,
    stepsPerExecution: w.stepsPerExecution,
    publishOutcome: (outcome) => w.bus.send(outcomes, [{ key: outcome.run_id, value: JSON.stringify(outcome) }]),
  });
}
