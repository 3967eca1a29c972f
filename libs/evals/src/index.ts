export * from './scorers';
export * from './dataset';
export * from './registry';
export * from './score';
export * from './compare';
export * from './paths';
export * from './canonical';
export * from './suites';
