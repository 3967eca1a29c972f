export type RefusalReason =
  | 'absolute_path'
  | 'path_escape'
  | 'link_escape'
  | 'through_link'
  | 'device_file'
  | 'setuid'
  | 'too_large'
  | 'too_many_entries'
  | 'too_much_metadata'
  | 'corrupt'
  | 'unsupported_entry';

/** An archive we will not restore, with a machine-readable reason and the entry that caused it. */
export class ArchiveRefused extends Error {
  constructor(
    readonly reason: RefusalReason,
    readonly entry: string,
    detail: string,
  ) {
    super(`archive refused (${reason})${entry ? ` at '${entry}'` : ''}: ${detail}`);
    this.name = 'ArchiveRefused';
  }
}
