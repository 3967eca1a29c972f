export * from './workspace';
export * from './tools';
export * from './agent.activities';
export * from './publish.activities';
export * from './snapshot.activities';
export * from './llm';
export * from './payloads';
export * from './eval.activities';
