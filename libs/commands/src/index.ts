export * from './lanes';
export * from './command.service';
export * from './wiring';
export * from './command-service.provider';
