import type { Readable } from 'node:stream';

export interface StoredObject {
  key: string;
  bytes: number;
  /** Where it is, for people and logs: `file:///abs/path` or `s3://bucket/key`. */
  url: string;
}

/**
 * Where archives and large payloads live: a local directory or an S3-compatible bucket. Keys are
 * `/`-separated relative names. A put is atomic: readers see the whole object or none, and a failed
 * put leaves nothing under its key.
 */
export interface ObjectStore {
  /** Streams `body` in; the same key again replaces the object. */
  put(key: string, body: Readable | Buffer): Promise<StoredObject>;
  /** Throws ObjectNotFound when there is no such object. */
  get(key: string): Promise<Readable>;
  stat(key: string): Promise<{ bytes: number } | undefined>;
  url(key: string): string;
  /** Removes the object; removing one that is not there is not an error. */
  delete(key: string): Promise<void>;
}

export class ObjectNotFound extends Error {
  constructor(readonly key: string) {
    super(`no object '${key}'`);
    this.name = 'ObjectNotFound';
  }
}

export class InvalidObjectKey extends Error {
  constructor(
    readonly key: string,
    reason: string,
  ) {
    super(`object key '${key}' ${reason}`);
    this.name = 'InvalidObjectKey';
  }
}

/** The same rule for every store, so a key that works locally works in S3 and the other way round. */
export function checkObjectKey(key: string): void {
  if (key.startsWith('/')) throw new InvalidObjectKey(key, 'escapes the store (leading /)');
  const parts = key.split('/');
  if (parts.includes('..')) throw new InvalidObjectKey(key, "escapes the store ('..')");
  if (key.includes('\0') || parts.some((p) => p === '' || p === '.')) throw new InvalidObjectKey(key, 'is not a valid key');
}
