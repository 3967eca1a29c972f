import { DeleteObjectCommand, GetObjectCommand, HeadObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { pipeline, Readable } from 'node:stream';
import { ByteCounter } from './byte-counter';
import { checkObjectKey, ObjectNotFound, type ObjectStore, type StoredObject } from './object-store';

export interface S3ObjectStoreOptions {
  bucket: string;
  region: string;
  /** An S3-compatible server (MinIO, ...); AWS itself when absent. */
  endpoint?: string;
  /** `endpoint/bucket/key` rather than `bucket.endpoint/key`: what MinIO and most S3-compatible servers need. */
  forcePathStyle?: boolean;
  /** Explicit credentials; the SDK's default chain (environment, profile, instance role) when absent. */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  /** Multipart part size (S3's minimum is 5 MiB). */
  partSize?: number;
  /** Parts in flight at once: an upload buffers about partSize x queueSize bytes. */
  queueSize?: number;
}

/**
 * Objects in an S3 bucket. Bodies are streamed as multipart uploads with a bounded queue, so memory
 * does not grow with the object; S3 shows an object only once the upload completes, and a failed one
 * is aborted, which is what makes a put atomic here.
 */
export class S3ObjectStore implements ObjectStore {
  private readonly client: S3Client;
  private readonly bucket: string;

  constructor(private readonly options: S3ObjectStoreOptions) {
    this.bucket = options.bucket;
    this.client = new S3Client({
      region: options.region,
      endpoint: options.endpoint,
      forcePathStyle: options.forcePathStyle ?? false,
      credentials: options.credentials,
      // The SDK's default flexible checksums send streamed bodies as `aws-chunked` with trailers, which
      // not every S3-compatible server reads; against those we send checksums only where S3 needs them.
      ...(options.endpoint ? { requestChecksumCalculation: 'WHEN_REQUIRED', responseChecksumValidation: 'WHEN_REQUIRED' } : {}),
    });
  }

  async put(key: string, body: Readable | Buffer): Promise<StoredObject> {
    checkObjectKey(key);
    let bodyError: unknown;
    let source: Readable | Buffer = body;
    const count = new ByteCounter();
    if (!Buffer.isBuffer(body)) {
      // pipeline, not pipe: an error in `body` must fail the upload rather than leave it waiting.
      source = pipeline(body, count, (err) => {
        bodyError = err ?? undefined;
      });
    }
    const upload = new Upload({
      client: this.client,
      params: { Bucket: this.bucket, Key: key, Body: source },
      partSize: this.options.partSize ?? 8 * 1024 * 1024,
      queueSize: this.options.queueSize ?? 4,
      leavePartsOnError: false,
    });
    try {
      await upload.done();
    } catch (err) {
      // When the body failed, that is the cause; the upload's own error may be a failed abort after it.
      throw bodyError ?? err;
    }
    return { key, bytes: Buffer.isBuffer(body) ? body.length : count.bytes, url: this.url(key) };
  }

  async get(key: string): Promise<Readable> {
    checkObjectKey(key);
    try {
      const out = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
      if (!(out.Body instanceof Readable)) throw new Error(`S3 returned no readable body for '${key}'`);
      return out.Body;
    } catch (err) {
      if (isNotFound(err)) throw new ObjectNotFound(key);
      throw err;
    }
  }

  async stat(key: string): Promise<{ bytes: number } | undefined> {
    checkObjectKey(key);
    try {
      const out = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return { bytes: out.ContentLength ?? 0 };
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  url(key: string): string {
    checkObjectKey(key);
    return `s3://${this.bucket}/${key}`;
  }

  async delete(key: string): Promise<void> {
    checkObjectKey(key);
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
  }

  /** Closes the client's connections (tests; a service keeps its store for its lifetime). */
  destroy(): void {
    this.client.destroy();
  }
}

function isNotFound(err: unknown): boolean {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e.name === 'NoSuchKey' || e.name === 'NotFound' || e.$metadata?.httpStatusCode === 404;
}
