import { Transform } from 'node:stream';

/** A pass-through that counts the bytes going by, and tells `onBytes` the running total (for heartbeats). */
export class ByteCounter extends Transform {
  bytes = 0;

  constructor(private readonly onBytes?: (total: number) => void) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: (error?: Error | null, data?: Buffer) => void): void {
    this.bytes += chunk.length;
    this.onBytes?.(this.bytes);
    done(null, chunk);
  }
}
