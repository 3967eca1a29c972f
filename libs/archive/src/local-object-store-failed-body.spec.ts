import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { LocalObjectStore } from './local-object-store';

/**
 * A body that fails before the store reads it (a snapshot capture cancelled while the store makes the
 * object's directory): the put fails with that error, and no 'error' event goes unhandled, which ends
 * the process (the snapshotter died this way in the fault matrix's Postgres pause; jest fails the test
 * on it).
 */
describe('the local object store, with a body that fails before it is read', () => {
  let root: string;
  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'objects-'));
  });
  afterEach(() => rm(root, { recursive: true, force: true }));

  it('fails the put with the body error and leaves nothing behind', async () => {
    async function* archive(): AsyncGenerator<Buffer> {
      yield Buffer.from('tar');
    }
    const body = Readable.from(archive());
    const put = new LocalObjectStore(root).put('run/snapshots/snap-0001/workspace.tar.gz', body);
    // Destroyed while put awaits its mkdir, before any pipeline listens to the body.
    body.destroy(new Error('capture cancelled'));
    await expect(put).rejects.toThrow('capture cancelled');
    expect(await readdir(join(root, 'run/snapshots/snap-0001'))).toEqual([]);
  });
});
