export * from './scorers';
export * from './suites';
