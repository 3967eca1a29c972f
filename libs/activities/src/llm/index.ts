export * from './client';
export * from './model-server';
