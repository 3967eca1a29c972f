import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RunEventEnvelope, SnapshotFileList, SnapshotRow } from '@agentrun/contracts';
import { Platform, uniqueId } from '../support/platform';
import { waitFor } from '../support/wait';

/**
 * A snapshot's workspace, looked into without downloading it: the gateway lists the archive's entries
 * and serves one file's bytes, reading the archive as it streams from the object store. What it lists
 * and serves is what GNU tar lists and extracts from the same archive.
 */
describe("a snapshot's files", () => {
  const MAX = 256;
  const platform = new Platform({ SNAPSHOT_FILE_MAX_BYTES: String(MAX) });
  const org = uniqueId('files');
  let runId: string;
  let snapshotId: string;
  let extracted: string;
  let gnuList: string[];

  beforeAll(async () => {
    await platform.start();
    runId = uniqueId('ws');
    // goal.md and a search's notes are under the cap; a vector file is over it (about 440 bytes).
    const goal = 'write notes on the parser';
    expect((await platform.http('POST', '/agents', { org, body: { run_id: runId, goal, max_steps: 4, snapshots: {} } })).status).toBe(202);
    await platform.waitForStatus(org, runId, 'done');
    const rows = await waitFor('the final snapshot', async () => {
      const events = (await platform.query<{ event: RunEventEnvelope }>('SELECT event FROM run_events WHERE org = $1 AND run_id = $2 ORDER BY seq', [org, runId])).map((r) => r.event);
      const final = events.filter((e) => e.type === 'snapshot_captured').map((e) => e.payload.snapshot as SnapshotRow).find((r) => r.is_final && r.capture_status === 'ok');
      return final;
    });
    snapshotId = rows.snapshot_id;
    const res = await fetch(`${platform.gatewayUrl}/runs/${runId}/snapshots/${snapshotId}/archive`, { headers: { 'X-Org': org } });
    expect(res.status).toBe(200);
    const archive = join(platform.dataDir, `${runId}.tar.gz`);
    writeFileSync(archive, Buffer.from(await res.arrayBuffer()));
    gnuList = execFileSync('tar', ['tzf', archive], { encoding: 'utf8' })
      .split('\n')
      .map((p) => p.replace(/^\.\//, '').replace(/\/$/, ''))
      .filter((p) => p !== '' && p !== '.');
    extracted = join(platform.dataDir, `${runId}-extracted`);
    mkdirSync(extracted);
    execFileSync('tar', ['xzf', archive, '-C', extracted]);
  });
  afterAll(() => platform.stop());

  const filesPath = () => `/runs/${runId}/snapshots/${snapshotId}/files`;

  it('lists what GNU tar lists, in its order, a page at a time', async () => {
    const listed: SnapshotFileList['items'] = [];
    let after: string | undefined;
    for (let pages = 0; ; pages++) {
      expect(pages).toBeLessThan(100);
      const res = await platform.http('GET', `${filesPath()}?limit=2${after !== undefined ? `&after=${encodeURIComponent(after)}` : ''}`, { org });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ run_id: runId, snapshot_id: snapshotId });
      listed.push(...(res.body as SnapshotFileList).items);
      after = (res.body as SnapshotFileList).next_after;
      if (after === undefined) break;
    }
    expect(listed.map((e) => e.path)).toEqual(gnuList);
    expect(listed.find((e) => e.path === 'goal.md')).toMatchObject({ type: 'file', size: readFileSync(join(extracted, 'goal.md')).length });
    expect(listed.some((e) => e.type === 'dir')).toBe(true);
  });

  it("serves each file's bytes as GNU tar extracts them, and a file past the cap as a 413 with its size", async () => {
    const { items } = (await platform.http('GET', `${filesPath()}?limit=1000`, { org })).body as SnapshotFileList;
    const files = items.filter((e) => e.type === 'file');
    const get = (entry: SnapshotFileList['items'][number]) =>
      fetch(`${platform.gatewayUrl}${filesPath()}/${entry.path.split('/').map(encodeURIComponent).join('/')}`, { headers: { 'X-Org': org } });
    const bytesOf = (entry: SnapshotFileList['items'][number]) => readFileSync(join(extracted, entry.path));
    // Split by the size GNU tar extracts: past the cap a 413 with the size, else the bytes themselves.
    const tooBig = files.filter((e) => bytesOf(e).length > MAX);
    const served = files.filter((e) => bytesOf(e).length <= MAX);
    expect(tooBig.length).toBeGreaterThan(0);
    expect(served.length).toBeGreaterThan(0);
    for (const entry of tooBig) {
      const res = await get(entry);
      expect(res.status).toBe(413);
      expect(await res.json()).toMatchObject({ status: 413, size: bytesOf(entry).length, max_bytes: MAX });
    }
    const types: { path: string; type: string | null }[] = [];
    for (const entry of served) {
      const res = await get(entry);
      expect(res.status).toBe(200);
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      expect(res.headers.get('content-security-policy')).toContain('sandbox');
      types.push({ path: entry.path, type: res.headers.get('content-type') });
      expect(Buffer.from(await res.arrayBuffer()).equals(bytesOf(entry))).toBe(true);
    }
    // Markdown (goal.md at least) is served as plain text.
    const markdown = types.filter((t) => t.path.endsWith('.md'));
    expect(markdown.map((t) => t.path)).toContain('goal.md');
    expect(markdown).toEqual(markdown.map(({ path }) => ({ path, type: 'text/plain; charset=utf-8' })));
    expect(files.some((e) => e.size > MAX)).toBe(true);
    expect(files.some((e) => e.path === 'goal.md' && e.size <= MAX)).toBe(true);
  });

  it('refuses hostile paths, a directory, a missing file, and another org', async () => {
    const dir = ((await platform.http('GET', `${filesPath()}?limit=1000`, { org })).body as SnapshotFileList).items.find((e) => e.type === 'dir')!;
    for (const bad of ['..%2Fetc%2Fpasswd', 'notes/..%2F..%2Fx', '%2Fetc%2Fpasswd', 'goal.md%00.txt']) {
      const res = await platform.http('GET', `${filesPath()}/${bad}`, { org });
      expect({ bad, status: res.status }).toEqual({ bad, status: 400 });
      expect(res.body.title).toBe('bad path');
    }
    expect((await platform.http('GET', `${filesPath()}/${dir.path}`, { org })).body).toMatchObject({ status: 404, detail: expect.stringContaining('is a directory') });
    expect((await platform.http('GET', `${filesPath()}/nope.txt`, { org })).status).toBe(404);
    expect((await platform.http('GET', `${filesPath()}?limit=0`, { org })).status).toBe(400);
    // Another org's run is the same 404 as none.
    expect((await platform.http('GET', filesPath(), { org: 'globex' })).status).toBe(404);
    expect((await platform.http('GET', `${filesPath()}/goal.md`, { org: 'globex' })).status).toBe(404);
    expect((await platform.http('GET', `/runs/${runId}/snapshots/snap-9999/files`, { org })).status).toBe(404);
  });
});
