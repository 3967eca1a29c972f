export * from './env';
export * from './platform';
export * from './faults';
export * from './production';
export * from './model-endpoints';
export * from './quotas';
export * from './event-keys';
export * from './model-prices';
