/**
 * The S3 store against a real S3 protocol server: s3rver, started in this process on a free port with
 * its own temporary directory, so this needs neither the shared stack nor MinIO.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, readlink, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
// s3rver ships no types; the little used here is typed by hand below.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const S3rver = require('s3rver') as new (options: Record<string, unknown>) => {
  run(): Promise<{ port: number }>;
  close(): Promise<void>;
};
import { ObjectNotFound } from './object-store';
import { packDirectory } from './pack';
import { restoreArchive } from './restore';
import { S3ObjectStore } from './s3-object-store';
import { concatParts, segmentChain } from './segments';

const BUCKET = 'agentrun-snapshots';

describe('the S3 object store (s3rver in process)', () => {
  let dir: string;
  let server: InstanceType<typeof S3rver>;
  let store: S3ObjectStore;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 's3rver-'));
    server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory: join(dir, 'data'), configureBuckets: [{ name: BUCKET }] });
    const { port } = await server.run();
    store = new S3ObjectStore({
      bucket: BUCKET,
      region: 'us-east-1',
      endpoint: `http://127.0.0.1:${port}`,
      forcePathStyle: true,
      // s3rver's fixed development credentials.
      credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
      partSize: 5 * 1024 * 1024,
      queueSize: 2,
    });
  });

  afterAll(async () => {
    store?.destroy();
    await server?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('round-trips a packed workspace: put (multipart, streamed), stat, get, restore, delete', async () => {
    const src = join(dir, 'ws');
    const blob = randomBytes(7 * 1024 * 1024 + 3);
    await mkdir(join(src, 'src/lib'), { recursive: true });
    await writeFile(join(src, 'data.bin'), blob);
    await writeFile(join(src, 'src/lib/notes.md'), '# notes\n');
    await symlink('lib/notes.md', join(src, 'src/notes-link'));
    const key = 'acme/run-1/snap-1.tar.gz';

    const stored = await store.put(key, packDirectory(src));
    expect(stored.key).toBe(key);
    expect(stored.url).toBe(`s3://${BUCKET}/${key}`);
    expect(await store.stat(key)).toEqual({ bytes: stored.bytes });
    // Packing is deterministic, so what came back must be exactly a fresh pack of the same tree.
    expect((await buffer(await store.get(key))).equals(await buffer(packDirectory(src)))).toBe(true);

    const out = join(dir, 'restored');
    expect(await restoreArchive(await store.get(key), out)).toEqual({ files: 2, dirs: 2, symlinks: 1, bytes: blob.length + 8 });
    expect((await readFile(join(out, 'data.bin'))).equals(blob)).toBe(true);
    expect(await readlink(join(out, 'src/notes-link'))).toBe('lib/notes.md');

    await store.delete(key);
    expect(await store.stat(key)).toBeUndefined();
    await expect(store.get(key)).rejects.toBeInstanceOf(ObjectNotFound);
  });

  it('puts a large stream in parts without knowing its length', async () => {
    const part = Buffer.alloc(1024 * 1024, 7);
    const body = Readable.from((function* () { for (let i = 0; i < 12; i++) yield part; })());
    expect((await store.put('big/stream.bin', body)).bytes).toBe(12 * part.length);
    const back = await buffer(await store.get('big/stream.bin'));
    expect(back.length).toBe(12 * part.length);
    expect(back.every((b) => b === 7)).toBe(true);
  });

  it('puts a buffer in one request', async () => {
    expect(await store.put('small.txt', Buffer.from('hello'))).toMatchObject({ bytes: 5 });
    expect((await buffer(await store.get('small.txt'))).toString()).toBe('hello');
  });

  it('leaves nothing under the key when the body fails midway', async () => {
    let sent = 0;
    const failing = new Readable({
      read() {
        if (sent++ < 8) this.push(Buffer.alloc(1024 * 1024, 1));
        else this.destroy(new Error('source died'));
      },
    });
    await expect(store.put('broken.bin', failing)).rejects.toThrow('source died');
    expect(await store.stat('broken.bin')).toBeUndefined();
  });

  it('chains and reads trajectory segments back, a streamed segment included', async () => {
    const keyOf = (lastSeq: number) => `acme/run-s3/trajectory/to-${String(lastSeq).padStart(12, '0')}.jsonl`;
    const line = (seq: number) => JSON.stringify({ seq, pad: 'x'.repeat(200) }) + '\n';
    const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => line(from + i)).join('');
    await store.put(keyOf(2), Buffer.from(range(1, 2)));
    // Written as the capture writes it: a stream of pages, its length unknown up front.
    await store.put(keyOf(40_000), Readable.from([Buffer.from(range(3, 20_000)), Buffer.from(range(20_001, 40_000))]));
    await store.put(keyOf(40_001), Buffer.from(range(40_001, 40_001)));
    const parts = await segmentChain(store, { keyOf }, 40_001);
    expect(parts.map((p) => p.key)).toEqual([keyOf(2), keyOf(40_000), keyOf(40_001)]);
    const text = (await buffer(concatParts(store, parts))).toString();
    expect(text).toBe(range(1, 40_001));
    expect(parts.reduce((n, p) => n + p.bytes, 0)).toBe(Buffer.byteLength(text));
  });

  it('answers not found: stat undefined, get ObjectNotFound, delete fine', async () => {
    expect(await store.stat('never/was.bin')).toBeUndefined();
    await expect(store.get('never/was.bin')).rejects.toBeInstanceOf(ObjectNotFound);
    await store.delete('never/was.bin');
  });
});
