import { Module, type DynamicModule, type Provider, type Type } from '@nestjs/common';
import { CommandAuthenticator, commandServiceProvider, CPU_TOOLS_ON_WORKFLOW_QUEUE } from '@agentrun/commands';
import { TOPICS } from '@agentrun/contracts';
import { KafkaBusTransport } from '@agentrun/kafka';
import { CommandKeyStore } from '@agentrun/persistence';
import { Database, HealthController, Kafka, KAFKA_TOPICS_USED, LOCAL_WORKFLOW_STARTS, PLATFORM_CONFIG, READINESS_CHECKS, Readiness, SERVICE_NAME, Temporal } from '@agentrun/runtime';
import { COMMAND_GROUP, CommandConsumer } from './command-consumer';
import { cpuToolsWithWorkflows, type OrchestratorConfig, type OrchestratorRole } from './config';
import { TemporalWorkers } from './temporal-workers';

/**
 * The orchestrator's providers for the roles it runs (ORCHESTRATOR_ROLES), and only those: a
 * `workflows`-only process opens no Postgres pool.
 *
 * - commands: the Kafka command consumer, which starts and steers workflows (Temporal client, Postgres ledger, Kafka);
 * - workflows: the workflow worker and the event publisher beside it (Kafka);
 * - cpu-tools: the CPU tool lane (Postgres for the effect ledger and leases; Kafka for the deltas its model calls stream).
 */
/** The topics each role reads or writes: commands, their outcomes and the DLQ; the run events it publishes; model reply deltas. */
const ROLE_TOPICS: Record<OrchestratorRole, string[]> = {
  commands: [TOPICS.commands, TOPICS.commandResults, TOPICS.commandsDlq],
  workflows: [TOPICS.runEvents],
  'cpu-tools': [TOPICS.runTokens],
};

function topicsOf(roles: ReadonlySet<OrchestratorRole>): string[] {
  return [...roles].flatMap((role) => ROLE_TOPICS[role]);
}

@Module({})
export class OrchestratorModule {
  static forRoot(config: OrchestratorConfig): DynamicModule {
    const roles = config.ORCHESTRATOR_ROLES;
    const commands = roles.has('commands');
    const workers = roles.has('workflows') || roles.has('cpu-tools');
    const needs = {
      database: commands || roles.has('cpu-tools'),
      kafka: commands || roles.has('workflows') || roles.has('cpu-tools'),
    };
    const checks: Type<unknown>[] = [
      ...(needs.database ? [Database] : []),
      ...(needs.kafka ? [Kafka] : []),
      ...(commands ? [Temporal] : []),
      ...(workers ? [TemporalWorkers] : []),
      ...(commands ? [KafkaBusTransport] : []),
    ];
    const providers: Provider[] = [
      { provide: PLATFORM_CONFIG, useValue: config },
      { provide: SERVICE_NAME, useValue: 'orchestrator' },
      // Only the topics of the roles it runs, so a principal per role needs rights to its own topics only.
      { provide: KAFKA_TOPICS_USED, useValue: topicsOf(roles) },
      ...(needs.database ? [Database] : []),
      ...(needs.kafka ? [Kafka] : []),
      ...(workers ? [TemporalWorkers] : []),
      // Commands and the workflow worker in one process: starts hand the first task to that worker at once.
      ...(commands && roles.has('workflows') && config.AGENTRUN_EAGER_WORKFLOW_START ? [{ provide: LOCAL_WORKFLOW_STARTS, useExisting: TemporalWorkers }] : []),
      // All three roles here: the runs it starts put their CPU tools on the workflow's queue, which its worker serves too.
      ...(cpuToolsWithWorkflows(config) ? [{ provide: CPU_TOOLS_ON_WORKFLOW_QUEUE, useValue: true }] : []),
      ...(commands
        ? [
            Temporal,
            commandServiceProvider(config),
            {
              // Production mode takes a command on Kafka only when signed with a key of its org; local mode takes any.
              provide: CommandAuthenticator,
              inject: [Database],
              useFactory: (db: Database) => new CommandAuthenticator(config.AGENTRUN_MODE === 'production', new CommandKeyStore(db.dataSource), config.AGENTRUN_COMMAND_KEY_SECRET),
            },
            {
              // The transport CommandConsumer's handler runs on; main.ts connects it to the app.
              provide: KafkaBusTransport,
              inject: [Kafka],
              useFactory: (kafka: Kafka) =>
                new KafkaBusTransport({
                  name: 'command-consumer',
                  bus: kafka.bus,
                  groupId: kafka.groupId(COMMAND_GROUP),
                  topic: (name) => kafka.topic(name),
                  concurrency: config.COMMAND_CONCURRENCY,
                }),
            },
          ]
        : []),
      Readiness,
      { provide: READINESS_CHECKS, inject: checks, useFactory: (...ready: unknown[]) => ready },
    ];
    return {
      module: OrchestratorModule,
      controllers: [HealthController, ...(commands ? [CommandConsumer] : [])],
      providers,
    };
  }
}
