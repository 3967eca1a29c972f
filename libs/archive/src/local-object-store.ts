import { randomBytes } from 'node:crypto';
import { mkdir, open, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, resolve, sep } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { pathToFileURL } from 'node:url';
import { ByteCounter } from './byte-counter';
import { checkObjectKey, InvalidObjectKey, ObjectNotFound, type ObjectStore, type StoredObject } from './object-store';

/** Objects as files under one directory; a put goes to `<key>.partial-<random>` and is renamed into place. */
export class LocalObjectStore implements ObjectStore {
  private readonly root: string;

  constructor(root: string) {
    this.root = resolve(root);
  }

  private path(key: string): string {
    checkObjectKey(key);
    const full = resolve(this.root, key);
    if (!full.startsWith(this.root + sep)) throw new InvalidObjectKey(key, 'escapes the store');
    return full;
  }

  async put(key: string, body: Readable | Buffer): Promise<StoredObject> {
    // The body may fail before the pipeline below reads it (a capture cancelled while the directory or
    // the file is made): its error must fail this put, which the pipeline still reports, and not reach
    // the process as an unhandled 'error' event.
    if (!Buffer.isBuffer(body)) body.on('error', () => undefined);
    const full = this.path(key);
    await mkdir(dirname(full), { recursive: true });
    const partial = `${full}.partial-${randomBytes(6).toString('hex')}`;
    let bytes = 0;
    try {
      if (Buffer.isBuffer(body)) {
        await writeFile(partial, body, { flag: 'wx' });
        bytes = body.length;
      } else {
        const count = new ByteCounter();
        // Opened here rather than by the stream: a stream still opening when the body fails would
        // create the partial file after the cleanup below had already run.
        const file = await open(partial, 'wx');
        try {
          await pipeline(body, count, file.createWriteStream());
        } finally {
          await file.close();
        }
        bytes = count.bytes;
      }
      await rename(partial, full);
    } catch (err) {
      await rm(partial, { force: true });
      throw err;
    }
    return { key, bytes, url: this.url(key) };
  }

  async get(key: string): Promise<Readable> {
    const full = this.path(key);
    try {
      // Opened here, not lazily by the stream, so a missing object is this call's error.
      const file = await open(full);
      return file.createReadStream({ highWaterMark: 1024 * 1024 });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'EISDIR') throw new ObjectNotFound(key);
      throw err;
    }
  }

  async stat(key: string): Promise<{ bytes: number } | undefined> {
    try {
      const s = await stat(this.path(key));
      return s.isFile() ? { bytes: s.size } : undefined;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  url(key: string): string {
    return pathToFileURL(this.path(key)).href;
  }

  async delete(key: string): Promise<void> {
    await rm(this.path(key), { force: true });
  }
}
