import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { pathToFileURL } from 'node:url';
import { LocalObjectStore } from './local-object-store';
import { InvalidObjectKey, ObjectNotFound } from './object-store';
import { createObjectStore, objectStoreConfigOf } from './object-store-config';
import { S3ObjectStore } from './s3-object-store';

describe('the local object store', () => {
  let root: string;
  let store: LocalObjectStore;
  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'objects-'));
    store = new LocalObjectStore(root);
  });
  afterEach(() => rm(root, { recursive: true, force: true }));

  it('puts a buffer or a stream, and gets, stats and deletes it', async () => {
    expect(await store.put('a/b/one.bin', Buffer.from('one'))).toEqual({ key: 'a/b/one.bin', bytes: 3, url: pathToFileURL(join(root, 'a/b/one.bin')).href });
    const two = await store.put('a/two.bin', Readable.from([Buffer.from('tw'), Buffer.from('o!')]));
    expect(two.bytes).toBe(4);
    expect((await buffer(await store.get('a/two.bin'))).toString()).toBe('two!');
    expect(await store.stat('a/b/one.bin')).toEqual({ bytes: 3 });
    expect(store.url('a/two.bin')).toMatch(/^file:\/\/\//);

    await store.delete('a/b/one.bin');
    expect(await store.stat('a/b/one.bin')).toBeUndefined();
    await store.delete('a/b/one.bin'); // not there any more: still fine
  });

  it('answers ObjectNotFound for a missing object, and stat undefined', async () => {
    await expect(store.get('nope')).rejects.toBeInstanceOf(ObjectNotFound);
    expect(await store.stat('nope')).toBeUndefined();
    expect(await store.stat('a')).toBeUndefined();
  });

  it('leaves nothing under the key when a put fails midway', async () => {
    await store.put('k', Buffer.from('old'));
    const failing = new Readable({
      read() {
        this.push(Buffer.alloc(64 * 1024));
        this.destroy(new Error('source died'));
      },
    });
    await expect(store.put('k', failing)).rejects.toThrow('source died');
    expect((await buffer(await store.get('k'))).toString()).toBe('old');
    await expect(store.put('fresh', new Readable({ read() { this.destroy(new Error('source died')); } }))).rejects.toThrow('source died');
    expect(await store.stat('fresh')).toBeUndefined();
    expect(await readdir(root)).toEqual(['k']); // no partial file left behind
  });

  it.each(['../x', '/etc/passwd', 'a/../../x', 'a//b', './a', ''])('refuses the key %p', async (key) => {
    await expect(store.put(key, Buffer.from('y'))).rejects.toBeInstanceOf(InvalidObjectKey);
    await expect(store.get(key)).rejects.toBeInstanceOf(InvalidObjectKey);
  });
});

describe('object store configuration', () => {
  const settings = {
    OBJECT_STORE_DIR: '/var/lib/agentrun/objects',
    OBJECT_STORE_S3_BUCKET: '',
    OBJECT_STORE_S3_ENDPOINT: '',
    OBJECT_STORE_S3_REGION: 'us-east-1',
    OBJECT_STORE_S3_FORCE_PATH_STYLE: true,
  };

  it('is the local directory when no bucket is set', () => {
    expect(objectStoreConfigOf(settings)).toEqual({ kind: 'local', dir: '/var/lib/agentrun/objects' });
    expect(createObjectStore(objectStoreConfigOf(settings))).toBeInstanceOf(LocalObjectStore);
  });

  it('is S3 when a bucket is set, with the endpoint, region and path style given', () => {
    const config = objectStoreConfigOf({ ...settings, OBJECT_STORE_S3_BUCKET: 'snaps', OBJECT_STORE_S3_ENDPOINT: 'http://minio:9000' });
    expect(config).toEqual({ kind: 's3', bucket: 'snaps', endpoint: 'http://minio:9000', region: 'us-east-1', forcePathStyle: true });
    const store = createObjectStore(config);
    expect(store).toBeInstanceOf(S3ObjectStore);
    expect(store.url('a/b.tar.gz')).toBe('s3://snaps/a/b.tar.gz');
    (store as S3ObjectStore).destroy();
  });
});
