export * from './errors';
export type { CommandDecision } from './decision';
export * from './ports';
export * from './command.service';
export * from './handlers/command-handler';
export * from './handlers/registry';
export * from './handlers/run-starter';
export * from './adapters/temporal-run-directory';
export * from './adapters/kafka-outcome-publisher';
export * from './wiring';
export * from './command-service.provider';
// Lanes belong to the contracts; kept here while the orchestrator still imports them from this lib.
export { lanesFor } from '@agentrun/contracts';
