import type { FactoryProvider } from '@nestjs/common';
import { createObjectStore, objectStoreConfigOf } from '@agentrun/archive';
import { modelEndpointNames, type Quotas, type RunDefaultsConfig, type TemporalConfig } from '@agentrun/config';
import { Database, Kafka, LOCAL_WORKFLOW_STARTS, Temporal, type LocalWorkflowStarts } from '@agentrun/runtime';
import { CommandService } from './command.service';
import { agentDefaultsOf, createCommandService, evalDefaultsOf } from './wiring';

/**
 * Provided (as `true`) by a process whose workflow worker serves the CPU tools on the workflow's own task
 * queue: the runs it starts put their CPU lane there, so those calls are dispatched eagerly.
 */
export const CPU_TOOLS_ON_WORKFLOW_QUEUE = Symbol('CPU_TOOLS_ON_WORKFLOW_QUEUE');

/** The command service as a Nest provider, for every service that accepts commands. */
export function commandServiceProvider(
  config: RunDefaultsConfig & Pick<TemporalConfig, 'AGENTRUN_TASK_QUEUE_PREFIX'> & Parameters<typeof objectStoreConfigOf>[0] & { AGENTRUN_MODEL_ENDPOINTS?: string; AGENTRUN_QUOTAS: Quotas },
): FactoryProvider<CommandService> {
  return {
    provide: CommandService,
    inject: [Temporal, Database, Kafka, { token: LOCAL_WORKFLOW_STARTS, optional: true }, { token: CPU_TOOLS_ON_WORKFLOW_QUEUE, optional: true }],
    useFactory: (temporal: Temporal, db: Database, kafka: Kafka, local?: LocalWorkflowStarts, cpuToolsOnWorkflowQueue?: boolean) =>
      createCommandService({
        temporal: () => temporal.client,
        ...(local ? { localStarts: () => local.client() } : {}),
        ...(cpuToolsOnWorkflowQueue ? { cpuToolsOnWorkflowQueue } : {}),
        dataSource: db.dataSource,
        bus: kafka.bus,
        topicPrefix: kafka.topicPrefix,
        taskQueuePrefix: config.AGENTRUN_TASK_QUEUE_PREFIX,
        agentDefaults: agentDefaultsOf(config),
        evalDefaults: evalDefaultsOf(config),
        objectStore: createObjectStore(objectStoreConfigOf(config)),
        modelEndpoints: modelEndpointNames(config.AGENTRUN_MODEL_ENDPOINTS),
        quotas: config.AGENTRUN_QUOTAS,
      }),
  };
}
