export { packDirectory, type PackOptions } from './pack';
export {
  restoreArchive,
  ArchiveRefused,
  DEFAULT_RESTORE_MAX_BYTES,
  DEFAULT_RESTORE_MAX_ENTRIES,
  type RefusalReason,
  type RestoreOptions,
  type RestoreSummary,
} from './restore';
export * from './object-store';
export * from './local-object-store';
export * from './s3-object-store';
export * from './object-store-config';
export { ByteCounter } from './byte-counter';
export * from './archive-view';
export * from './archive-diff';
export * from './segments';
