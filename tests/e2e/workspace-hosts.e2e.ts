import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { snapshotObjectKeys, TOPICS, type RunEventEnvelope, type SnapshotRow } from '@agentrun/contracts';
import { oneToN, scriptedRunShape, seqsOnTopic, workspaceTree } from '../support/invariants';
import { Platform, uniqueId, type TopicRecord } from '../support/platform';
import { SseClient } from '../support/sse';
import { waitFor } from '../support/wait';

/**
 * Workspaces that follow the run: two workspace hosts, each with its own orchestrator (cpu-tools) and
 * snapshotter and its own workspace root, no path shared between them; one gpu-worker serves both on
 * the shared GPU lane, the workspace staged through the object store. A lost host
 * (every process killed) is noticed by schedule-to-start on its queues (3 s here), and the run goes on
 * on the other host from its latest recovery point (every 4 steps here), its later tool steps redone.
 */
describe('workspace hosts: no shared disk', () => {
  const platform = new Platform(
    { AGENTRUN_HOST_SCHEDULE_TO_START_S: '3', AGENTRUN_RECOVERY_EVERY_STEPS: '4', TOOL_PACE_MS: '40' },
    { hosts: ['h1', 'h2'] },
  );
  const org = 'acme';
  let events: TopicRecord<RunEventEnvelope>[];

  beforeAll(async () => {
    await platform.start();
    events = await platform.follow<RunEventEnvelope>(TOPICS.runEvents);
  });
  afterAll(() => platform.stop());

  const start = (runId: string, steps: number) =>
    platform.publishCommand({ command_id: uniqueId('c'), type: 'agent.start', org, run_id: runId, payload: { goal: 'follow the run', max_steps: steps } });
  const stateOf = async (runId: string) =>
    (await platform.query<{ step: number; host: string | null; status: string }>(
      `SELECT (state->>'step')::int AS step, state->>'workspace_host' AS host, status FROM runs WHERE org = $1 AND run_id = $2`,
      [org, runId],
    ))[0];
  /** Waits until the run is at least `step` steps in, on some host; its step and host then. */
  const onHostAt = (runId: string, step: number) =>
    waitFor(`run ${runId} ${step} steps in on a host`, async () => {
      const s = await stateOf(runId);
      return s && s.host && s.step >= step ? s : undefined;
    }, 120_000, 50);
  /**
   * Holds the run once it is `step` steps in, on some host, so a host killed then still has the run's
   * later steps to move however fast the steps are; `platform.releaseRun` lets it go on.
   */
  const heldAt = async (runId: string, step: number) => {
    const at = await onHostAt(runId, step);
    await platform.holdRun(org, runId);
    return at;
  };
  const eventsOf = (runId: string, type: string) => events.filter((e) => e.value.run_id === runId && e.value.org === org && e.value.type === type);
  const dirOf = (host: string, runId: string) => join(platform.workspaceRoot(host), org, runId);

  it('kill -9 of the host holding a run: it ends done on the other host, its workspace as an uninterrupted run leaves it, seqs 1..N, every effect once', async () => {
    const steps = 16;
    const reference = uniqueId('ref');
    const moved = uniqueId('moved');
    await start(reference, steps);
    await start(moved, steps);
    const before = await heldAt(moved, 6);
    const lost = before.host as string;
    await platform.stopHost(lost, 'SIGKILL');
    await platform.releaseRun(org, moved);

    await platform.waitForStatus(org, moved, 'done', 180_000);
    const [move] = await waitFor('the workspace_moved event', () => eventsOf(moved, 'workspace_moved').length > 0 && eventsOf(moved, 'workspace_moved'), 30_000);
    const payload = move.value.payload as unknown as { from: string; to: string; snapshot_id?: string; steps_replayed: number };
    const other = lost === 'h1' ? 'h2' : 'h1';
    expect(payload).toMatchObject({ from: lost, to: other });
    expect(payload.snapshot_id).toMatch(/^snap-\d{4}$/);
    expect((await stateOf(moved))?.host).toBe(other);

    // Seqs: 1..N with no gap on the topic, the read model and the SSE stream.
    const [row] = await platform.query<{ last_seq: number }>('SELECT last_seq FROM runs WHERE org = $1 AND run_id = $2', [org, moved]);
    await waitFor('every event on the topic', () => seqsOnTopic(events, org, moved).length === row.last_seq, 30_000);
    expect(seqsOnTopic(events, org, moved)).toEqual(oneToN(row.last_seq));
    const sse = new SseClient(`${platform.gatewayUrl}/runs/${moved}/events`, { 'X-Org': org });
    await waitFor('the stream to end', () => sse.ended, 60_000);
    expect(sse.events().map((e) => e.seq)).toEqual(oneToN(row.last_seq));

    // CPU tools ran on the hosts' own queues; GPU tools on the shared lane (staged), before and after the move.
    const lanes = new Set(eventsOf(moved, 'step_completed').map((e) => (e.value.payload as unknown as { lane?: string }).lane).filter(Boolean));
    expect([...lanes].sort()).toEqual([`${platform.prefix}cpu-tools@${lost}`, `${platform.prefix}cpu-tools@${other}`, `${platform.prefix}gpu-tools`].sort());

    // Every model and tool effect once: the steps redone on the new host were answered from the ledger.
    const shape = scriptedRunShape(steps);
    const [{ n }] = await platform.query<{ n: string }>(`SELECT count(*) AS n FROM effect_ledger WHERE starts_with(idempotency_key, $1)`, [`${org}/${moved}:`]);
    expect(Number(n)).toBe(shape.effects);

    // The final workspace equals the uninterrupted run's (same scripted input), wherever that one ran.
    await platform.waitForStatus(org, reference, 'done', 180_000);
    const refHost = (await stateOf(reference))?.host as string;
    expect(workspaceTree(dirOf(other, moved))).toEqual(workspaceTree(dirOf(refHost, reference)));
  });

  it('a host started again after its runs moved leaves their new workspaces alone, and takes new work', async () => {
    const moves = events.filter((e) => e.value.type === 'workspace_moved');
    const last = moves[moves.length - 1];
    const payload = last.value.payload as unknown as { from: string; to: string };
    const movedDir = dirOf(payload.to, last.value.run_id);
    const before = workspaceTree(movedDir);
    await platform.startHost(payload.from);
    // The returned host takes work: runs land on both hosts again.
    const landedOn = new Set<string>();
    await waitFor('a new run on the host that came back', async () => {
      const runId = uniqueId('after');
      await start(runId, 2);
      await platform.waitForStatus(org, runId, 'done', 120_000);
      landedOn.add((await stateOf(runId))?.host as string);
      return landedOn.has(payload.from);
    }, 180_000, 10);
    expect(workspaceTree(movedDir)).toEqual(before);
  });

  it('with a per-turn snapshot series: captures keep landing across the move, on the new host, and the final lands', async () => {
    const runId = uniqueId('series');
    const res = await platform.http('POST', '/agents', { org, body: { run_id: runId, goal: 'follow the run', max_steps: 12, snapshots: { per_turn: true } } });
    expect(res.status).toBe(202);
    const before = await heldAt(runId, 4);
    await platform.stopHost(before.host as string, 'SIGKILL');
    await platform.releaseRun(org, runId);
    await platform.waitForStatus(org, runId, 'done', 180_000);
    await platform.startHost(before.host as string);
    const all = await waitFor('the run finished on the topic', () => eventsOf(runId, 'run_finished').length > 0 && events.filter((e) => e.value.run_id === runId), 30_000);
    const movedAt = all.findIndex((e) => e.value.type === 'workspace_moved');
    expect(movedAt).toBeGreaterThan(0);
    const rowsAfter = all.slice(movedAt).filter((e) => e.value.type === 'snapshot_captured').map((e) => (e.value.payload as unknown as { snapshot: SnapshotRow }).snapshot);
    expect(rowsAfter.length).toBeGreaterThan(1);
    expect(rowsAfter.filter((r) => r.capture_status === 'ok').length).toBeGreaterThan(1);
    expect(rowsAfter[rowsAfter.length - 1]).toMatchObject({ is_final: true, capture_status: 'ok' });
  });

  it("a fork on hosts: its workspace is the snapshot's, on the host that restored it", async () => {
    const parent = uniqueId('parent');
    const res = await platform.http('POST', '/agents', { org, body: { run_id: parent, goal: 'follow the run', max_steps: 3, snapshots: {} } });
    expect(res.status).toBe(202);
    await platform.waitForStatus(org, parent, 'done', 120_000);
    const final = await waitFor('the final row', () => {
      const rows = eventsOf(parent, 'snapshot_captured').map((e) => (e.value.payload as unknown as { snapshot: SnapshotRow }).snapshot);
      return rows.find((r) => r.is_final && r.capture_status === 'ok');
    }, 30_000);
    const child = uniqueId('fork');
    const fork = await platform.http('POST', `/runs/${parent}/fork`, { org, body: { run_id: child, snapshot_id: final.snapshot_id } });
    expect(fork.status).toBe(202);
    await platform.waitForStatus(org, child, 'done', 120_000);
    const host = (await stateOf(child))?.host as string;
    expect(['h1', 'h2']).toContain(host);
    const extracted = join(platform.dataDir, `${child}-extracted`);
    mkdirSync(extracted, { recursive: true });
    execFileSync('tar', ['xzf', join(platform.dataDir, 'objects', snapshotObjectKeys(org, parent, final.snapshot_id).archive), '-C', extracted]);
    expect(workspaceTree(dirOf(host, child))).toEqual(workspaceTree(extracted));
  });

  it("a fork whose host is lost mid-run ends done on the other host, with its parent's final workspace", async () => {
    const parent = uniqueId('fparent');
    const res = await platform.http('POST', '/agents', { org, body: { run_id: parent, goal: 'follow the run', max_steps: 16, snapshots: { per_turn: true } } });
    expect(res.status).toBe(202);
    await platform.waitForStatus(org, parent, 'done', 180_000);
    const from = await waitFor('the parent row at step 3', () => {
      const rows = eventsOf(parent, 'snapshot_captured').map((e) => (e.value.payload as unknown as { snapshot: SnapshotRow }).snapshot);
      return rows.find((r) => r.step === 3 && r.bundle_object_url);
    }, 30_000);
    const child = uniqueId('fchild');
    const fork = await platform.http('POST', `/runs/${parent}/fork`, { org, body: { run_id: child, snapshot_id: from.snapshot_id } });
    expect(fork.status).toBe(202);
    const at = await heldAt(child, 6);
    await platform.stopHost(at.host as string, 'SIGKILL');
    await platform.releaseRun(org, child);
    await platform.waitForStatus(org, child, 'done', 180_000);
    await platform.startHost(at.host as string);
    const [move] = await waitFor('the fork moved', () => eventsOf(child, 'workspace_moved').length > 0 && eventsOf(child, 'workspace_moved'), 30_000);
    const to = (move.value.payload as unknown as { to: string }).to;
    expect(to).not.toBe(at.host);
    // From step 3 on the fork took the parent's steps again (same plan, answered from the parent's
    // ledger where the parent had recorded them): its workspace ends as the parent's did.
    const parentHost = (await stateOf(parent))?.host as string;
    expect(workspaceTree(dirOf(to, child))).toEqual(workspaceTree(dirOf(parentHost, parent)));
  });

  it('20 concurrent runs over 2 hosts: both hosts carry work, all end done', async () => {
    const ids = Array.from({ length: 20 }, () => uniqueId('many'));
    await Promise.all(ids.map((id) => start(id, 6)));
    for (const id of ids) await platform.waitForStatus(org, id, 'done', 240_000);
    const hosts = new Set<string>();
    for (const id of ids) hosts.add((await stateOf(id))?.host as string);
    expect([...hosts].sort()).toEqual(['h1', 'h2']);
  });
});
