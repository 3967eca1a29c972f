export * from './agent-run.types';
export * from './definitions';
export * from './search-attributes';
export { AgentRun, plan, planLlm, DEFAULT_HISTORY_BUDGET, DEFAULT_RESEARCH_EVERY, DEFAULT_TIMEOUTS, type PlanState, type Step } from './agent-run.workflow';
export { ResearchAgent } from './research-agent.workflow';
export * from './conversation';
export * from './eval-run.types';
export { EvalRun, approveUpdate, cancelEvalSignal, evalStatusQuery } from './eval-run.workflow';
