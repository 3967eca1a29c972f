export * from './scorers';
