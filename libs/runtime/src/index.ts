export * from './health';
export * from './bootstrap';
export * from './infrastructure';
export * from './worker-pool';
export * from './lane-workers';
export * from './fatal';
export * from './temporal-connection';
export * from './event-keys';
