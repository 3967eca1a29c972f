/**
 * The contracts as workflow code sees them: the workflow bundle resolves `@agentrun/contracts` to this
 * entry (tools/bundle-workflows.js). Every type is here, but values only from the modules that build no
 * schema. Each new workflow execution initialises its modules again in the reusable sandbox, and
 * building every TypeBox schema was about 3 ms of each (half its module start-up).
 * `npm run lint` type-checks the workflows against this entry (libs/workflows/tsconfig.bundle-check.json),
 * so a workflow reaching for a value built with a schema fails there, not as `undefined` at run time.
 */
export * from './names';
export * from './statuses';
export * from './tool-names';
export * from './lanes';
export type * from './schema';
export type * from './commands';
export type * from './outcomes';
export type * from './events';
export type * from './run-state';
export type * from './tools';
export type * from './api';
