export * from './bus';
export * from './dlq';
export * from './retry';
export * from './security';
export * from './startup';
export * from './topics';
export * from './transport';
