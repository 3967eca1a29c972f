export * from './lanes';
export * from './command.service';
