export * from './names';
export * from './statuses';
export * from './commands';
export * from './outcomes';
export * from './events';
export * from './lanes';
