export * from './agent-run.types';
export * from './definitions';
export * from './search-attributes';
export { AgentRun, plan, type Step } from './agent-run.workflow';
