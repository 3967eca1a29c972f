import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inlineOrStore, LocalObjectStore, readStoredPayload } from './payloads';

describe('large payloads', () => {
  let root: string;
  let store: LocalObjectStore;
  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'objects-'));
    store = new LocalObjectStore(root);
  });
  afterEach(() => rm(root, { recursive: true, force: true }));

  it('stay inline up to the limit', async () => {
    expect(await inlineOrStore(store, { org: 'acme', run_id: 'r' }, 'small', 128 * 1024)).toEqual({ text: 'small', bytes: 5 });
  });

  it('go to the object store past it, leaving a reference and a short preview in history', async () => {
    const big = 'x'.repeat(200 * 1024);
    const out = await inlineOrStore(store, { org: 'acme', run_id: 'r' }, big, 128 * 1024);
    expect(out.ref).toMatch(/^objects:\/\/payloads\/acme\/r\/[0-9a-f]{64}\.txt$/);
    expect(out.bytes).toBe(200 * 1024);
    expect(out.text.length).toBeLessThan(2_000);
    expect((await readStoredPayload(store, out.ref!)).toString()).toBe(big);
    // Content-addressed: the same payload twice is one object.
    expect((await inlineOrStore(store, { org: 'acme', run_id: 'r' }, big, 128 * 1024)).ref).toBe(out.ref);
  });

  it('refuses keys that escape the store', async () => {
    await expect(store.put('../x', Buffer.from('y'))).rejects.toThrow(/escapes/);
  });
});
