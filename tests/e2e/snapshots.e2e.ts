import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { snapshotObjectKeys, TOPICS, trajectorySegmentKey, type CommandOutcome, type RunEventEnvelope, type SnapshotRow } from '@agentrun/contracts';
import { statusQuery } from '@agentrun/workflows';
import { oneToN, workspaceTree } from '../support/invariants';
import { Platform, uniqueId, type TopicRecord } from '../support/platform';
import { stackUrls } from '../support/stack-env';
import { waitFor } from '../support/wait';
import { replayHistories } from '../support/histories';

/**
 * The snapshot series, archives and forks on the real servers. Tools are paced a little so cadence
 * captures land mid-run; tests that need a capture in flight restart the snapshotter with a pace of
 * its own (SNAPSHOT_PACE_MS) and put it back afterwards.
 */
describe('snapshots and forks on the real servers', () => {
  const platform = new Platform({ TOOL_PACE_TICKS: '2', TOOL_PACE_MS: '150', AGENTRUN_STEPS_PER_EXECUTION: '4' });
  const org = 'acme';
  let outcomes: TopicRecord<CommandOutcome>[];
  let connection: Connection;
  let client: Client;

  beforeAll(async () => {
    await platform.start();
    outcomes = await platform.follow<CommandOutcome>(TOPICS.commandResults);
    connection = await Connection.connect({ address: stackUrls().temporalAddress });
    client = new Client({ connection, namespace: stackUrls().namespace });
  });
  afterAll(async () => {
    await connection?.close();
    await platform.stop();
  });

  /** The URL the platform's object store (a folder) gives the object at `key`. */
  const objectUrl = (key: string) => pathToFileURL(join(platform.dataDir, 'objects', key)).href;
  const startAgent = async (runId: string, payload: Record<string, unknown>) => {
    const res = await platform.http('POST', '/agents', { org, body: { run_id: runId, goal: `goal of ${runId}`, ...payload } });
    expect(res.status).toBe(202);
  };
  const runEvents = async (runId: string) =>
    (await platform.query<{ event: RunEventEnvelope }>('SELECT event FROM run_events WHERE org = $1 AND run_id = $2 ORDER BY seq', [org, runId])).map((r) => r.event);
  const rowsOf = async (runId: string): Promise<SnapshotRow[]> =>
    (await runEvents(runId)).filter((e) => e.type === 'snapshot_captured').map((e) => e.payload.snapshot as SnapshotRow);
  const finished = async (runId: string) => {
    const events = await runEvents(runId);
    return events.find((e) => e.type === 'run_finished');
  };
  const waitFinished = (runId: string, timeoutMs = 120_000) => waitFor(`run ${runId} to finish`, () => finished(runId), timeoutMs, 100);
  /** Restarts the snapshotter with its own pace (ms); 0 puts the normal one back. */
  const paceSnapshotter = async (ms: number) => {
    platform.appEnv.snapshotter = { SNAPSHOT_PACE_MS: String(ms) };
    await platform.stopApp('snapshotter');
    await platform.startApp('snapshotter');
  };
  const captureInFlight = (runId: string) =>
    waitFor('a capture in flight', async () => {
      const { raw } = await client.workflow.getHandle(`${org}/${runId}`).describe();
      return (raw.pendingActivities ?? []).some((a) => a.activityType?.name === 'captureSnapshot' && (a.heartbeatDetails?.payloads?.length ?? 0) > 0);
    }, 60_000, 50);

  it('cadence and per-turn both on: turn rows and cadence rows, never overlapping, then one final; the manifest equals the events', async () => {
    const runId = uniqueId('both');
    // A cadence row needs the run to outlast the 1 s cadence, which a paced twelve-step run no longer
    // did every time once steps got cheaper: the run is held paused until the ticker's first row lands,
    // then let go. The ticker keeps its cadence while the steps wait.
    await startAgent(runId, { max_steps: 12, snapshots: { per_turn: true, interval_seconds: 1, max_snapshots: 50 } });
    await waitFor('run started', async () => (await runEvents(runId)).length > 0);
    await platform.holdRun(org, runId);
    await waitFor('a cadence row', async () => (await rowsOf(runId)).some((r) => r.turn === undefined && !r.is_final), 60_000);
    await platform.releaseRun(org, runId);
    expect((await waitFinished(runId)).payload.state).toMatchObject({ status: 'done' });
    const rows = await rowsOf(runId);
    const turnRows = rows.filter((r) => r.turn !== undefined);
    expect(turnRows.map((r) => r.turn)).toEqual(oneToN(12));
    expect(rows.filter((r) => r.turn === undefined && !r.is_final).length).toBeGreaterThanOrEqual(1);
    expect(rows.filter((r) => r.is_final)).toHaveLength(1);
    expect(rows[rows.length - 1]).toMatchObject({ is_final: true, capture_status: 'ok' });
    for (const row of rows) {
      expect(row).toMatchObject({ capture_status: 'ok', source_context_id: runId, source_agent_name: 'AgentRun' });
      // Where the capture stored the archive, the trajectory segment and the state document, in the
      // platform's object store (a folder: file URLs).
      const keys = snapshotObjectKeys(org, runId, row.snapshot_id);
      expect(row.trajectory_last_seq).toEqual(expect.any(Number));
      expect({ snapshot: row.snapshot_id, bundle: row.bundle_object_url, trajectory: row.trajectory_s3_uri, env: row.env_universe_id, env_version: row.env_universe_version }).toEqual({
        snapshot: row.snapshot_id,
        bundle: objectUrl(keys.archive),
        trajectory: objectUrl(trajectorySegmentKey(org, runId, row.trajectory_last_seq!)),
        env: objectUrl(keys.state),
        env_version: row.version,
      });
    }
    // One ordinal per row, in the order they landed: captures never ran two at a time.
    expect(rows.map((r) => r.snapshot_id)).toEqual(oneToN(rows.length).map((n) => `snap-${String(n).padStart(4, '0')}`));
    expect(rows.map((r) => r.version)).toEqual(oneToN(rows.length));
    const manifest = await platform.http('GET', `/runs/${runId}/snapshots`, { org });
    expect(manifest.status).toBe(200);
    // Over HTTP each row gives the archive's and the trajectory's links where the event named the
    // object store's locations, and leaves out the location no route serves.
    const shown = rows.map((row) => {
      const expected: SnapshotRow = { ...row };
      delete expected.env_universe_id;
      if (row.trajectory_s3_uri) expected.trajectory_s3_uri = `/runs/${runId}/snapshots/${row.snapshot_id}/trajectory`;
      if (row.bundle_object_url) expected.bundle_object_url = `/runs/${runId}/snapshots/${row.snapshot_id}/archive`;
      return expected;
    });
    expect(manifest.body.items).toEqual(shown);
    // The final trajectory (its segments read back) holds every event up to the final capture.
    await replayHistories(client, [{ workflowId: `${org}/${runId}`, file: 'snapshot-series.history.pb' }]);
    const finalTrajectory = await platform.http('GET', `/runs/${runId}/snapshots/${rows[rows.length - 1].snapshot_id}/trajectory`, { org });
    expect(finalTrajectory.status).toBe(200);
    expect(String(finalTrajectory.body).trim().split('\n').length).toBeGreaterThan(6);
  });

  it('a spent budget is recorded once; the final capture is still taken (max_snapshots + 1 captures at most), across continue-as-new', async () => {
    const runId = uniqueId('budget');
    // Four steps per execution: the ten-step run hands over twice, and the budget carries.
    await startAgent(runId, { max_steps: 10, snapshots: { per_turn: true, max_snapshots: 3 } });
    expect((await waitFinished(runId)).payload.state).toMatchObject({ status: 'done', step: 10 });
    const rows = await rowsOf(runId);
    const captures = rows.filter((r) => r.version !== undefined);
    expect(captures.length).toBeLessThanOrEqual(3 + 1);
    expect(rows.filter((r) => r.capture_reason === 'limit_reached')).toHaveLength(1);
    expect(rows.filter((r) => !r.is_final && r.capture_status === 'ok').map((r) => r.turn)).toEqual([1, 2, 3]);
    expect(rows.filter((r) => r.capture_reason === 'limit_reached')[0].turn).toBe(4);
    expect(rows[rows.length - 1]).toMatchObject({ is_final: true, capture_status: 'ok' });
    expect(new Set(rows.map((r) => r.snapshot_id)).size).toBe(rows.length);
  });

  it('the series carries across continue-as-new: turns keep counting, ids stay unique, the run hands over', async () => {
    const runId = uniqueId('can');
    await startAgent(runId, { max_steps: 9, snapshots: { per_turn: true, max_snapshots: 20, at_end: false } });
    expect((await waitFinished(runId)).payload.state).toMatchObject({ status: 'done' });
    const rows = await rowsOf(runId);
    expect(rows.map((r) => r.turn)).toEqual(oneToN(9));
    expect(rows.map((r) => r.snapshot_id)).toEqual(oneToN(9).map((n) => `snap-${String(n).padStart(4, '0')}`));
    // Four steps per execution: the last execution began at step 8, so it handed over twice.
    const status = await client.workflow.getHandle(`${org}/${runId}`).query(statusQuery);
    expect(status.execution_started_at_step).toBe(8);
  });

  it('a snapshot configuration that never captures is refused at the boundary, over HTTP and Kafka', async () => {
    const res = await platform.http('POST', '/agents', { org, body: { goal: 'x', snapshots: { at_end: false } } });
    expect(res.status).toBe(400);
    expect(res.body.detail).toMatch(/at_end=false need a positive interval_seconds .* or per_turn=true/);
    const bad = await platform.http('POST', '/agents', { org, body: { goal: 'x', snapshots: { timeout_seconds: 0 } } });
    expect(bad.status).toBe(400);
    expect(bad.body.detail).toMatch(/timeout_seconds/);
    const commandId = uniqueId('c');
    await platform.publishCommand({ command_id: commandId, type: 'agent.start', org, run_id: uniqueId('never'), payload: { goal: 'x', snapshots: { at_end: false, interval_seconds: 0 } } });
    const outcome = await waitFor('the outcome', () => outcomes.find((o) => o.value.command_id === commandId));
    expect(outcome.value).toMatchObject({ outcome: 'rejected', reason: 'invalid_payload' });
    expect(outcome.value.reason && outcome.value).toHaveProperty('message', expect.stringMatching(/no capture ever runs/));
  });

  it('the archive downloads, GNU tar reads it, and another org cannot see it', async () => {
    const runId = uniqueId('dl');
    await startAgent(runId, { max_steps: 2, snapshots: {} });
    await waitFinished(runId);
    const [final] = await rowsOf(runId);
    expect(final).toMatchObject({ is_final: true, capture_status: 'ok' });
    const res = await fetch(`${platform.gatewayUrl}/runs/${runId}/snapshots/${final.snapshot_id}/archive`, { headers: { 'X-Org': org } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/gzip');
    const file = join(platform.dataDir, `${runId}.tar.gz`);
    writeFileSync(file, Buffer.from(await res.arrayBuffer()));
    expect(execFileSync('tar', ['tzf', file], { encoding: 'utf8' })).toMatch(/goal\.md/);
    expect((await platform.http('GET', `/runs/${runId}/snapshots`, { org: 'globex' })).status).toBe(404);
    expect((await platform.http('GET', `/runs/${runId}/snapshots/${final.snapshot_id}/archive`, { org: 'globex' })).status).toBe(404);
    expect((await platform.http('GET', `/runs/${runId}/snapshots/snap-9999/archive`, { org })).status).toBe(404);
  });

  describe('with a slow snapshotter', () => {
    afterAll(() => paceSnapshotter(0));

    it('a capture that times out gives a failed row and the run goes on', async () => {
      await paceSnapshotter(4_000);
      const runId = uniqueId('timeout');
      await startAgent(runId, { max_steps: 2, snapshots: { per_turn: true, at_end: false, timeout_seconds: 1 } });
      expect((await waitFinished(runId)).payload.state).toMatchObject({ status: 'done', step: 2 });
      const rows = await rowsOf(runId);
      expect(rows.map((r) => [r.turn, r.capture_status, r.capture_reason])).toEqual([
        [1, 'failed', 'capture_timeout_1s'],
        [2, 'failed', 'capture_timeout_1s'],
      ]);
      // A row without an archive cannot be forked.
      const fork = await platform.http('POST', `/runs/${runId}/fork`, { org, body: { snapshot_id: rows[0].snapshot_id } });
      expect(fork.status).toBe(409);
      expect(fork.body).toMatchObject({ reason: 'snapshot_unusable' });
      expect(fork.body.detail).toMatch(/no workspace archive landed \(failed: capture_timeout_1s\)/);
    });

    it('a missing final capture fails the run loudly, naming the reason', async () => {
      const runId = uniqueId('nofinal');
      await startAgent(runId, { max_steps: 1, snapshots: { timeout_seconds: 1 } });
      const end = await waitFinished(runId);
      expect(end.payload.state).toMatchObject({ status: 'failed', reason: 'final_snapshot_missing' });
      expect(String((end.payload.state as { message?: string }).message)).toMatch(/final snapshot did not land \(failed: capture_timeout_1s\)/);
    });

    it('the final capture waits out an interior capture in flight (longer than its timeout) and then lands', async () => {
      // A capture takes 5 s and may take 9: each alone fits with 4 s to spare for a busy machine (files run
      // side by side), while the final's wait and its own capture together (about 10 s) do not.
      await paceSnapshotter(5_000);
      const runId = uniqueId('lockwait');
      await startAgent(runId, { max_steps: 2, snapshots: { interval_seconds: 1, timeout_seconds: 9 } });
      // Held paused until the first tick's capture is in flight, so the run ends while it still is.
      await waitFor('run started', async () => (await runEvents(runId)).length > 0);
      expect((await platform.http('POST', `/runs/${runId}/pause`, { org })).status).toBe(202);
      await captureInFlight(runId);
      expect((await platform.http('POST', `/runs/${runId}/resume`, { org })).status).toBe(202);
      expect((await waitFinished(runId)).payload.state).toMatchObject({ status: 'done' });
      const rows = await rowsOf(runId);
      expect(rows.map((r) => [r.is_final, r.capture_status])).toEqual([
        [false, 'ok'],
        [true, 'ok'],
      ]);
    });

    it('cancel mid-capture records a skipped/cancelled final row at once, without waiting for the capture', async () => {
      await paceSnapshotter(60_000);
      const runId = uniqueId('cancel');
      await startAgent(runId, { max_steps: 6, snapshots: { per_turn: true, timeout_seconds: 120 } });
      await captureInFlight(runId);
      expect((await platform.http('POST', `/runs/${runId}/cancel`, { org })).status).toBe(202);
      // Far sooner than the capture's 60 s: the cancel does not wait for it.
      const end = await waitFinished(runId, 20_000);
      expect(end.payload.state).toMatchObject({ status: 'cancelled' });
      const rows = await rowsOf(runId);
      expect(rows[rows.length - 1]).toMatchObject({ is_final: true, capture_status: 'skipped', capture_reason: 'cancelled' });
    });

    it('cancel during the final capture: the run is cancelled, not done, and its final row says so', async () => {
      await paceSnapshotter(60_000);
      const runId = uniqueId('cancelfinal');
      await startAgent(runId, { max_steps: 1, snapshots: { timeout_seconds: 120 } });
      await captureInFlight(runId);
      expect((await platform.http('POST', `/runs/${runId}/cancel`, { org })).status).toBe(202);
      const end = await waitFinished(runId, 20_000);
      expect(end.payload.state).toMatchObject({ status: 'cancelled' });
      const rows = await rowsOf(runId);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ is_final: true, capture_status: 'skipped', capture_reason: 'cancelled' });
    });

    it('kill -9 of the snapshotter mid-capture: the retry succeeds and the row is ok', async () => {
      await paceSnapshotter(3_000);
      const runId = uniqueId('kill');
      await startAgent(runId, { max_steps: 1, snapshots: { timeout_seconds: 90 } });
      await captureInFlight(runId);
      expect(await platform.stopApp('snapshotter', 'SIGKILL')).toBe(-1);
      await paceSnapshotter(0);
      expect((await waitFinished(runId)).payload.state).toMatchObject({ status: 'done' });
      const rows = await rowsOf(runId);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ is_final: true, capture_status: 'ok' });
      // The dead attempt left nothing half-written under the snapshot's prefix, nor beside its trajectory segment.
      const dir = join(platform.dataDir, 'objects', org, runId, 'snapshots', rows[0].snapshot_id);
      expect(readdirSync(dir).sort()).toEqual(['state.json', 'workspace.tar.gz']);
      expect(readdirSync(join(platform.dataDir, 'objects', org, runId, 'trajectory'))).toEqual([`to-${String(rows[0].trajectory_last_seq).padStart(12, '0')}.jsonl`]);
    });
  });

  describe('fork', () => {
    /** Every entry under a directory: type, mode, size, content digest or link target. */
    const tree = workspaceTree;

    it("a forked run's workspace equals the snapshot's", async () => {
      const parent = uniqueId('parent');
      await startAgent(parent, { max_steps: 3, snapshots: {} });
      await waitFinished(parent);
      const [final] = await rowsOf(parent);
      expect(final.step).toBe(3);
      const child = uniqueId('fork');
      // Forked at its last step, the fork has nothing left to do: its workspace is exactly the restored one.
      const res = await platform.http('POST', `/runs/${parent}/fork`, { org, body: { run_id: child, snapshot_id: final.snapshot_id } });
      expect(res.status).toBe(202);
      expect(res.body).toMatchObject({ run_id: child, outcome: 'accepted' });
      const end = await waitFinished(child);
      expect(end.payload.state).toMatchObject({ status: 'done', step: 3, parent_run_id: parent, forked_from_snapshot: final.snapshot_id });
      const started = (await runEvents(child))[0];
      expect(started).toMatchObject({ type: 'run_started', payload: { forked_from: { run_id: parent, snapshot_id: final.snapshot_id, step: 3 } } });
      const extracted = join(platform.dataDir, `${child}-extracted`);
      mkdirSync(extracted, { recursive: true });
      execFileSync('tar', ['xzf', join(platform.dataDir, 'objects', snapshotObjectKeys(org, parent, final.snapshot_id).archive), '-C', extracted]);
      expect(tree(join(platform.dataDir, 'workspaces', org, child))).toEqual(tree(extracted));
      const row = (await platform.query<{ parent_run_id: string }>('SELECT parent_run_id FROM runs WHERE org = $1 AND run_id = $2', [org, child]))[0];
      expect(row.parent_run_id).toBe(parent);
    });

    it('a fork goes on from the snapshot: nothing before the fork point is done again, and no effect is repeated', async () => {
      const parent = uniqueId('parent');
      await startAgent(parent, { max_steps: 8, snapshots: { per_turn: true } });
      await waitFinished(parent);
      const at4 = (await rowsOf(parent)).find((r) => r.turn === 4)!;
      expect(at4.step).toBe(4);
      const billedBefore = platform.model!.requests;
      const child = uniqueId('fork');
      expect((await platform.http('POST', `/runs/${parent}/fork`, { org, body: { run_id: child, snapshot_id: at4.snapshot_id } })).status).toBe(202);
      expect((await waitFinished(child)).payload.state).toMatchObject({ status: 'done', step: 8 });
      const steps = (await runEvents(child)).filter((e) => e.type === 'step_completed').map((e) => e.payload.step);
      expect(steps).toEqual([4, 5, 6, 7]);
      const effects = await platform.query<{ key: string; effect: string }>(
        'SELECT idempotency_key AS key, effect FROM effect_ledger WHERE starts_with(idempotency_key, $1)',
        [`${org}/${child}:`],
      );
      const stepOf = (key: string) => Number(key.split(':')[1]);
      expect(effects.every((e) => stepOf(e.key) >= 4)).toBe(true);
      // Model calls the fork made: steps 4 (think) and 7 (reflect) of the scripted plan; none before the fork point.
      const modelEffects = effects.filter((e) => e.effect === 'model');
      expect(platform.model!.requests - billedBefore).toBe(modelEffects.length);
      // The parent's ledger is untouched: one row per key, as before.
      const parentKeys = await platform.query<{ n: string }>('SELECT count(*) AS n FROM effect_ledger WHERE starts_with(idempotency_key, $1)', [`${org}/${parent}:`]);
      expect(Number(parentKeys[0].n)).toBeGreaterThan(0);
    });

    it('a fork with a goal of its own goes on toward it, and notes the change', async () => {
      const parent = uniqueId('parent');
      await startAgent(parent, { max_steps: 4, snapshots: { per_turn: true } });
      await waitFinished(parent);
      const at2 = (await rowsOf(parent)).find((r) => r.turn === 2)!;
      const child = uniqueId('fork');
      const res = await platform.http('POST', `/runs/${parent}/fork`, { org, body: { run_id: child, snapshot_id: at2.snapshot_id, goal: 'a different goal' } });
      expect(res.status).toBe(202);
      expect((await waitFinished(child)).payload.state).toMatchObject({ status: 'done', goal: 'a different goal', step: 4 });
      const status = await client.workflow.getHandle(`${org}/${child}`).query(statusQuery);
      expect(status.context).toMatch(/\[goal changed: a different goal\]/);
      await replayHistories(client, [{ workflowId: `${org}/${child}`, file: 'fork.history.pb' }]);
    });

    it('fork refusals: unknown snapshot, another org, an eval run, no snapshot id', async () => {
      const parent = uniqueId('parent');
      await startAgent(parent, { max_steps: 1, snapshots: {} });
      await waitFinished(parent);
      const unknown = await platform.http('POST', `/runs/${parent}/fork`, { org, body: { snapshot_id: 'snap-0999' } });
      expect(unknown.status).toBe(404);
      expect(unknown.body).toMatchObject({ reason: 'unknown_snapshot' });
      const foreign = await platform.http('POST', `/runs/${parent}/fork`, { org: 'globex', body: { snapshot_id: 'snap-0001' } });
      expect(foreign.status).toBe(404);
      expect(foreign.body).toMatchObject({ reason: 'unknown_run' });
      const evalRun = uniqueId('eval');
      expect((await platform.http('POST', '/evals', { org, body: { run_id: evalRun, model: 'm', suite: 's', cases: 1, reviewers: ['alice'] } })).status).toBe(202);
      await waitFor('the eval run in the read model', async () => (await platform.http('GET', `/runs/${evalRun}`, { org })).status === 200);
      const wrongKind = await platform.http('POST', `/runs/${evalRun}/fork`, { org, body: { snapshot_id: 'snap-0001' } });
      expect(wrongKind.status).toBe(409);
      expect(wrongKind.body).toMatchObject({ reason: 'wrong_kind' });
      const missing = await platform.http('POST', `/runs/${parent}/fork`, { org, body: {} });
      expect(missing.status).toBe(400);
      expect(missing.body.detail).toMatch(/snapshot_id/);
    });
  });
});
