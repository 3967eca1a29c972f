import { createHash } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname, join, resolve, sep } from 'node:path';

/** Where large payloads go instead of workflow history: a local directory (S3-compatible stores later). */
export class LocalObjectStore {
  private readonly root: string;

  constructor(root: string) {
    this.root = resolve(root);
  }

  private path(key: string): string {
    const full = resolve(this.root, key);
    if (!full.startsWith(this.root + sep)) throw new Error(`object key '${key}' escapes the store`);
    return full;
  }

  /** Writes atomically (temporary name, then rename); the same key twice is the same object. */
  async put(key: string, data: string | Buffer): Promise<string> {
    const full = this.path(key);
    await mkdir(dirname(full), { recursive: true });
    const partial = `${full}.partial-${process.pid}`;
    await writeFile(partial, data);
    await rename(partial, full);
    return `objects://${key}`;
  }

  async get(ref: string): Promise<Buffer> {
    if (!ref.startsWith('objects://')) throw new Error(`'${ref}' is not an object reference`);
    return readFile(this.path(ref.slice('objects://'.length)));
  }

  location(ref: string): string {
    return join(this.root, ref.slice('objects://'.length));
  }
}

export interface Inlined {
  /** The text itself, or a preview of it when it was stored. */
  text: string;
  /** Set when the whole text went to the object store. */
  ref?: string;
  bytes: number;
}

const PREVIEW_CHARS = 1_024;

/**
 * Keeps a large model reply or tool output out of workflow history: over `limit` bytes it is
 * stored under a content-addressed key and history keeps the reference and a short preview, so a
 * long run meets neither Temporal's 2 MB payload nor its 50 MB history limit.
 */
export async function inlineOrStore(store: LocalObjectStore, scope: { org: string; run_id: string }, text: string, limit: number): Promise<Inlined> {
  const bytes = Buffer.byteLength(text);
  if (bytes <= limit) return { text, bytes };
  const digest = createHash('sha256').update(text).digest('hex');
  const ref = await store.put(`payloads/${scope.org}/${scope.run_id}/${digest}.txt`, text);
  return { text: `${text.slice(0, PREVIEW_CHARS)}\n[... ${bytes} bytes in all, stored at ${ref}]`, ref, bytes };
}
