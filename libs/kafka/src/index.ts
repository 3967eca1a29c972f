export * from './bus';
export * from './dlq';
export * from './retry';
export * from './transport';
