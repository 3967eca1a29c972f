export * from './bus';
export * from './dlq';
