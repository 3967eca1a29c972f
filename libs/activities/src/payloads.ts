import { createHash } from 'node:crypto';
import { buffer } from 'node:stream/consumers';
import { LocalObjectStore, type ObjectStore } from '@agentrun/archive';

/**
 * Large payloads go to an object store (@agentrun/archive: a local directory or S3). The local store
 * is re-exported because the workers build theirs from here.
 */
export { LocalObjectStore };

/**
 * What history keeps instead of the text: the object's key under a scheme of our own, not its
 * file:// or s3:// URL, so a reference stays valid when the store moves (a directory becomes a bucket).
 */
const REF_SCHEME = 'objects://';

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
export async function inlineOrStore(store: ObjectStore, scope: { org: string; run_id: string }, text: string, limit: number): Promise<Inlined> {
  const bytes = Buffer.byteLength(text);
  if (bytes <= limit) return { text, bytes };
  const digest = createHash('sha256').update(text).digest('hex');
  const key = `payloads/${scope.org}/${scope.run_id}/${digest}.txt`;
  // Content-addressed: an object already under the key is this text, so a retry uploads nothing.
  if (!(await store.stat(key))) await store.put(key, Buffer.from(text));
  const ref = `${REF_SCHEME}${key}`;
  return { text: `${text.slice(0, PREVIEW_CHARS)}\n[... ${bytes} bytes in all, stored at ${ref}]`, ref, bytes };
}

/** The whole text behind a reference `inlineOrStore` left in history. */
export async function readStoredPayload(store: ObjectStore, ref: string): Promise<Buffer> {
  if (!ref.startsWith(REF_SCHEME)) throw new Error(`'${ref}' is not an object reference`);
  return buffer(await store.get(ref.slice(REF_SCHEME.length)));
}
