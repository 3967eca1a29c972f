export * from './entities';
export * from './data-source';
export * from './projection';
export * from './cursor';
export * from './read-model';
export * from './ledgers';
export * from './tokens';
export * from './run-state';
