export * from './env';
export * from './platform';
export * from './faults';
export * from './production';
