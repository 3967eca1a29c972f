export * from './lanes';
export * from './command.service';
export * from './wiring';
