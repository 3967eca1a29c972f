import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { applyPatch } from 'diff';
import type { RunDiff, RunEventEnvelope, SnapshotDiff, SnapshotRow } from '@agentrun/contracts';
import { textOf } from '@agentrun/archive';
import { Platform, uniqueId } from '../support/platform';
import { waitFor } from '../support/wait';

/** Every entry under `root` by relative path: a file's digest and mode, a link's target, a directory. */
function tree(root: string, rel = '', out: Record<string, string> = {}): Record<string, string> {
  for (const name of readdirSync(join(root, rel)).sort()) {
    const path = rel ? `${rel}/${name}` : name;
    const full = join(root, path);
    const s = lstatSync(full);
    if (s.isSymbolicLink()) out[path] = `link ${readlinkSync(full)}`;
    else if (s.isDirectory()) {
      out[path] = 'dir';
      tree(root, path, out);
    } else out[path] = `file ${createHash('sha256').update(readFileSync(full)).digest('hex')} ${(s.mode & 0o7777).toString(8)}`;
  }
  return out;
}


/**
 * Where a fork and its parent went different ways: an 8-step run with a snapshot per turn, forked from
 * its step-4 snapshot with a new goal. `GET /runs/{fork}/diff?with={parent}` lines them up by step;
 * the snapshot diff of the fork's final workspace against the fork point lists exactly what GNU tar
 * finds different between the two archives, extracted.
 */
describe('diffs of runs and snapshots', () => {
  const platform = new Platform();
  const org = uniqueId('diff');
  beforeAll(() => platform.start());
  afterAll(() => platform.stop());

  const rowsOf = async (runId: string) =>
    (await platform.query<{ event: RunEventEnvelope }>("SELECT event FROM run_events WHERE org = $1 AND run_id = $2 AND type = 'snapshot_captured' ORDER BY seq", [org, runId])).map(
      (r) => r.event.payload.snapshot as SnapshotRow,
    );
  /** Where `extract` unpacks a snapshot's archive. */
  const extracted = (runId: string, snapshotId: string) => join(platform.dataDir, `${runId}-${snapshotId}`);
  const extract = async (runId: string, snapshotId: string) => {
    const res = await fetch(`${platform.gatewayUrl}/runs/${runId}/snapshots/${snapshotId}/archive`, { headers: { 'X-Org': org } });
    expect(res.status).toBe(200);
    const file = join(platform.dataDir, `${runId}-${snapshotId}.tar.gz`);
    writeFileSync(file, Buffer.from(await res.arrayBuffer()));
    const dir = extracted(runId, snapshotId);
    mkdirSync(dir, { recursive: true });
    execFileSync('tar', ['xzf', file, '-C', dir]);
    return tree(dir);
  };

  /**
   * A snapshot diff of `a` to `b` lists exactly the entries GNU tar finds added, removed and changed
   * between the two extracted archives, and every changed text file's unified diff takes a's text to
   * b's (a binary one says so). Resolves with how many changed text files had a diff.
   */
  const expectTarsDiff = async (files: SnapshotDiff['files'], [aRun, aSnap]: [string, string], [bRun, bSnap]: [string, string]): Promise<number> => {
    const [before, after] = [await extract(aRun, aSnap), await extract(bRun, bSnap)];
    expect(files.added.map((e) => e.path).sort()).toEqual(Object.keys(after).filter((p) => !(p in before)).sort());
    expect(files.removed.map((e) => e.path).sort()).toEqual(Object.keys(before).filter((p) => !(p in after)).sort());
    expect(files.changed.map((c) => c.path).sort()).toEqual(Object.keys(after).filter((p) => p in before && before[p] !== after[p]).sort());
    let texts = 0;
    for (const c of files.changed.filter((x) => x.what.includes('content') && x.before.type === 'file' && x.after.type === 'file')) {
      const [was, is] = [textOf(readFileSync(join(extracted(aRun, aSnap), c.path))), textOf(readFileSync(join(extracted(bRun, bSnap), c.path)))];
      if (was === undefined || is === undefined) {
        expect({ path: c.path, diff: c.diff, omitted: c.diff_omitted }).toEqual({ path: c.path, diff: undefined, omitted: 'binary' });
        continue;
      }
      // From its `---` line; applied to a's text it gives b's.
      expect({ path: c.path, head: c.diff?.split('\n').slice(0, 2) }).toEqual({ path: c.path, head: [`--- a/${c.path}`, `+++ b/${c.path}`] });
      expect({ path: c.path, patched: applyPatch(was, c.diff!) }).toEqual({ path: c.path, patched: is });
      texts += 1;
    }
    return texts;
  };

  it('names the fork point as the first divergent step, and the files the fork changed', async () => {
    const parent = uniqueId('parent');
    expect((await platform.http('POST', '/agents', { org, body: { run_id: parent, goal: 'survey the parser notes', max_steps: 8, snapshots: { per_turn: true } } })).status).toBe(202);
    await platform.waitForStatus(org, parent, 'done');
    const at4 = await waitFor('the step-4 snapshot', async () => (await rowsOf(parent)).find((r) => r.turn === 4 && r.bundle_object_url));
    expect(at4.step).toBe(4);
    const fork = uniqueId('fork');
    expect((await platform.http('POST', `/runs/${parent}/fork`, { org, body: { run_id: fork, snapshot_id: at4.snapshot_id, goal: 'index the lexer instead', snapshots: {} } })).status).toBe(202);
    await platform.waitForStatus(org, fork, 'done');
    const forkFinal = await waitFor("the fork's final snapshot", async () => (await rowsOf(fork)).find((r) => r.is_final && r.bundle_object_url));

    const res = await platform.http('GET', `/runs/${fork}/diff?with=${parent}`, { org });
    expect(res.status).toBe(200);
    const diff = res.body as RunDiff;
    expect(diff).toMatchObject({ run_id: fork, with: parent, fork: { parent, child: fork, snapshot_id: at4.snapshot_id, step: 4 }, steps: { run: 8, with: 8 } });
    expect(diff.first_divergent_step).toBe(4);
    expect(diff.steps_shared).toBe(4);
    // The same the other way round; and a run against itself does not diverge.
    expect((await platform.http('GET', `/runs/${parent}/diff?with=${fork}`, { org })).body).toMatchObject({ first_divergent_step: diff.first_divergent_step, steps: { run: 8, with: 8 } });
    expect((await platform.http('GET', `/runs/${parent}/diff?with=${parent}`, { org })).body).toMatchObject({ first_divergent_step: null, steps_shared: 8 });

    // The fork's final workspace against the fork point: what GNU tar finds, no more, no less.
    // From the fork point (the parent's snapshot) to the fork's final one: what the fork did (it only
    // adds files: each step writes its own).
    const snap = await platform.http('GET', `/runs/${parent}/snapshots/${at4.snapshot_id}/diff/${forkFinal.snapshot_id}?run=${fork}`, { org });
    expect(snap.status).toBe(200);
    expect(snap.body).toMatchObject({ run_id: parent, snapshot_id: at4.snapshot_id, with: { run_id: fork, snapshot_id: forkFinal.snapshot_id } });
    const files = (snap.body as SnapshotDiff).files;
    await expectTarsDiff(files, [parent, at4.snapshot_id], [fork, forkFinal.snapshot_id]);
    expect(files.added.length).toBeGreaterThan(0);

    // The run diff carries the comparison of the two final workspaces, the fork's against its parent's:
    // the steps after the fork point wrote the same files with other text, each with its unified diff.
    const parentFinal = await waitFor("the parent's final snapshot", async () => (await rowsOf(parent)).find((r) => r.is_final && r.bundle_object_url));
    expect(diff.final_files?.snapshots).toEqual({ run: forkFinal.snapshot_id, with: parentFinal.snapshot_id });
    const finals = diff.final_files!.files;
    const textChanges = await expectTarsDiff(finals, [fork, forkFinal.snapshot_id], [parent, parentFinal.snapshot_id]);
    expect(textChanges).toBeGreaterThan(0);


    // Within one run, and refusals: an unrelated run, a bad query, another org.
    expect((await platform.http('GET', `/runs/${parent}/snapshots/${at4.snapshot_id}/diff/${at4.snapshot_id}`, { org })).body.files).toMatchObject({ added: [], removed: [], changed: [] });
    const stranger = uniqueId('other');
    expect((await platform.http('POST', '/agents', { org, body: { run_id: stranger, goal: 'something else', max_steps: 2, snapshots: {} } })).status).toBe(202);
    await platform.waitForStatus(org, stranger, 'done');
    const unrelated = await platform.http('GET', `/runs/${fork}/snapshots/${forkFinal.snapshot_id}/diff/snap-0001?run=${stranger}`, { org });
    expect(unrelated.status).toBe(409);
    expect((await platform.http('GET', `/runs/${fork}/diff?with=${stranger}`, { org })).status).toBe(200);
    expect((await platform.http('GET', `/runs/${fork}/diff`, { org })).status).toBe(400);
    expect((await platform.http('GET', `/runs/${fork}/diff?with=..%2Fx`, { org })).status).toBe(400);
    expect((await platform.http('GET', `/runs/${fork}/diff?with=${parent}`, { org: 'globex' })).status).toBe(404);
    expect((await platform.http('GET', `/runs/${fork}/snapshots/${forkFinal.snapshot_id}/diff/${at4.snapshot_id}?run=${parent}`, { org: 'globex' })).status).toBe(404);
  }, 240_000);
});
