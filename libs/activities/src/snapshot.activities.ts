import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { randomBytes } from 'node:crypto';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { Readable } from 'node:stream';
import { ByteCounter, packDirectory, restoreArchive, type ObjectStore } from '@agentrun/archive';
import { snapshotObjectKeys, trajectorySegmentKey } from '@agentrun/contracts';
import type { CaptureInput, CaptureProgress, CaptureResult, ForkState, RestoreResult, SnapshotActivities, TrajectorySegment } from '@agentrun/workflows';
import { CaptureSources, SnapshotManifest, type RecordedEffectRow } from '@agentrun/persistence';
import type { DataSource } from 'typeorm';
import { stepOfKey } from './effect-keys';
import { Workspace } from './workspace';

export interface SnapshotDeps {
  workspaceRoot: string;
  store: ObjectStore;
  /** Where the trajectory (run events) and the recorded effects are read from. */
  db: DataSource;
  /** Simulated slowness before each capture, for tests that kill or time out a capture in flight. */
  paceMs?: number;
  /** The org's snapshot quotas (AGENTRUN_QUOTAS); without it, none. */
  quota?: (org: string) => { snapshots_per_run: number; snapshot_bytes_per_run: number };
}

/** The failure type the series records as a `skipped` row: the run goes on without this capture. */
export const QUOTA_EXCEEDED = 'quota_exceeded';

/** What `state.json` holds: the fork state and the effects recorded when the snapshot was taken. */
export interface SnapshotStateDocument {
  snapshot_id: string;
  version: number;
  org: string;
  run_id: string;
  workflow_id: string;
  state: ForkState;
  recorded_effects: RecordedEffectRow[];
}

/** How many recorded effects a snapshot keeps (newest first); a fork only ever reuses those at its step. */
const MAX_RECORDED_EFFECTS = 5_000;

/** Heartbeats at most every `everyMs`, with the progress a timed-out capture's row is built from. */
function beater(everyMs = 1_000): (progress: CaptureProgress) => void {
  let last = 0;
  return (progress) => {
    const now = Date.now();
    if (now - last < everyMs) return;
    last = now;
    Context.current().heartbeat(progress);
  };
}

/**
 * One capture: the workspace archive (streamed, never held in memory), the trajectory segment (the
 * run's own events since the previous capture's segment) and the state a fork starts from. Only a missing archive fails the
 * capture; a degraded trajectory or state read makes it `partial`, still gradable.
 */
export function createSnapshotActivities(deps: SnapshotDeps): SnapshotActivities {
  const sources = new CaptureSources(deps.db);
  const manifest = new SnapshotManifest(deps.db);
  /**
   * An interior capture past the run's stored snapshots or bytes is not taken. The final is exempt, as
   * from `max_snapshots`: the run's end state is what it is graded and forked on. The manifest lags
   * the captures by the projector's delay, so a run may pass its bytes by the captures in that window.
   */
  const checkQuota = async (input: CaptureInput): Promise<void> => {
    if (!deps.quota || input.is_final) return;
    const quota = deps.quota(input.org);
    const stored = await manifest.storedTotals(input.org, input.run_id);
    if (stored.count >= quota.snapshots_per_run)
      throw ApplicationFailure.nonRetryable(`the run stores ${stored.count} snapshots, org ${input.org}'s limit (snapshots_per_run) is ${quota.snapshots_per_run}`, QUOTA_EXCEEDED);
    if (stored.bytes >= quota.snapshot_bytes_per_run)
      throw ApplicationFailure.nonRetryable(`the run's snapshots hold ${stored.bytes} bytes, org ${input.org}'s limit (snapshot_bytes_per_run) is ${quota.snapshot_bytes_per_run}`, QUOTA_EXCEEDED);
  };
  return {
    async captureSnapshot(input: CaptureInput): Promise<CaptureResult> {
      const ctx = Context.current();
      await checkQuota(input);
      const keys = snapshotObjectKeys(input.org, input.run_id, input.snapshot_id);
      const workspace = new Workspace(deps.workspaceRoot, input.org, input.run_id);
      const exists = await stat(workspace.dir).then((s) => s.isDirectory(), () => false);
      if (!exists) throw ApplicationFailure.nonRetryable(`the workspace of ${input.org}/${input.run_id} does not exist`, 'WorkspaceMissing');
      const beat = beater();
      ctx.heartbeat({ phase: 'archive' } satisfies CaptureProgress);
      if (deps.paceMs) {
        for (let waited = 0; waited < deps.paceMs; waited += 500) {
          ctx.heartbeat({ phase: 'archive' } satisfies CaptureProgress);
          await ctx.sleep(Math.min(500, deps.paceMs - waited));
        }
      }

      // The recorded effects are read before the archive, so no effect the fork would reuse is missing
      // from the workspace it restores.
      let effects: SnapshotStateDocument['recorded_effects'] | undefined;
      let effectsError: string | undefined;
      try {
        effects = await sources.recordedEffects(input.workflow_id, MAX_RECORDED_EFFECTS);
      } catch (err) {
        effectsError = (err as Error).message;
      }

      const packed = packDirectory(workspace.dir, { onProgress: (bytes) => beat({ phase: 'archive', bytes }) });
      const abort = (): void => {
        packed.destroy(new Error('capture cancelled'));
      };
      ctx.cancellationSignal.addEventListener('abort', abort);
      let stored;
      try {
        stored = await deps.store.put(keys.archive, packed);
      } finally {
        ctx.cancellationSignal.removeEventListener('abort', abort);
      }
      const progress: CaptureProgress = { phase: 'trajectory', bytes: stored.bytes, bundle_object_url: stored.url };
      ctx.heartbeat(progress);

      const reasons: string[] = [];
      let trajectory: { url: string; segment: TrajectorySegment } | undefined;
      try {
        trajectory = await writeTrajectorySegment(sources, deps.store, input);
      } catch (err) {
        reasons.push(`trajectory_read_failed: ${(err as Error).message}`.slice(0, 200));
      }
      ctx.heartbeat({ ...progress, phase: 'state' } satisfies CaptureProgress);

      let envId: string | undefined;
      try {
        if (!effects) throw new Error(`the effect ledger could not be read: ${effectsError ?? 'unknown error'}`);
        const doc: SnapshotStateDocument = {
          snapshot_id: input.snapshot_id,
          version: input.version,
          org: input.org,
          run_id: input.run_id,
          workflow_id: input.workflow_id,
          state: input.state,
          recorded_effects: effects,
        };
        envId = (await deps.store.put(keys.state, Buffer.from(JSON.stringify(doc)))).url;
      } catch (err) {
        reasons.push(`env_capture_failed: ${(err as Error).message}`.slice(0, 200));
      }

      return {
        artifact_id: `${input.run_id}-workspace`,
        bundle_object_url: stored.url,
        bytes: stored.bytes,
        ...(trajectory ? { trajectory_s3_uri: trajectory.url, trajectory_segment: trajectory.segment } : {}),
        ...(envId ? { env_universe_id: envId, env_universe_version: input.version } : {}),
        reasons,
      };
    },
  };
}

/**
 * Which events a capture's segment holds: those after the newest segment that landed, up to the end
 * of the contiguous run of events now projected. With nothing new the capture names the previous
 * segment again and writes nothing; the very first capture of a run with no events yet writes an
 * empty segment (first 1, last 0), so every capture whose read succeeded names a trajectory.
 */
export function planTrajectorySegment(after: TrajectorySegment | undefined, end: number): { segment: TrajectorySegment; write: boolean } {
  const previous = after?.last_seq ?? 0;
  if (end > previous) return { segment: { first_seq: previous + 1, last_seq: end }, write: true };
  if (after) return { segment: { ...after }, write: false };
  return { segment: { first_seq: 1, last_seq: 0 }, write: true };
}

/**
 * Writes this capture's trajectory segment, streamed from Postgres a page at a time: the bytes a
 * capture reads and stores are those of the events since the previous capture, not the whole run's.
 */
async function writeTrajectorySegment(sources: CaptureSources, store: ObjectStore, input: CaptureInput): Promise<{ url: string; segment: TrajectorySegment }> {
  const after = input.trajectory_after;
  const end = await sources.contiguousEnd(input.org, input.run_id, after?.last_seq ?? 0);
  const { segment, write } = planTrajectorySegment(after, end);
  const key = trajectorySegmentKey(input.org, input.run_id, segment.last_seq);
  if (!write) {
    // The previous segment is this capture's too; it must still be there to be named.
    if (!(await store.stat(key))) throw new Error(`the previous trajectory segment (to seq ${segment.last_seq}) is not in the object store`);
    return { url: store.url(key), segment };
  }
  const pages = sources.trajectoryPages(input.org, input.run_id, segment.first_seq - 1, segment.last_seq);
  const body = Readable.from(
    (async function* () {
      for await (const page of pages) yield Buffer.from(page.map((row) => JSON.stringify(row.event) + '\n').join(''));
    })(),
    { objectMode: false },
  );
  const stored = await store.put(key, body);
  return { url: stored.url, segment };
}

export interface RestoreDeps {
  workspaceRoot: string;
  store: ObjectStore;
  maxBytes: number;
}

/**
 * A fork's first step: the snapshot's archive restored into the fork's workspace, and the state it
 * starts from. Restored beside the target and renamed into place, so a retry after a crash starts
 * clean and the workspace never shows half an archive.
 */
export function restoreSnapshotActivity(deps: RestoreDeps): (input: { org: string; run_id: string; from_run_id: string; snapshot_id: string }) => Promise<RestoreResult> {
  return async ({ org, run_id, from_run_id, snapshot_id }) => {
    const keys = snapshotObjectKeys(org, from_run_id, snapshot_id);
    const unusable = (why: string): never => {
      throw ApplicationFailure.nonRetryable(`snapshot ${snapshot_id} of run '${from_run_id}' cannot be restored: ${why}`, 'SnapshotUnusable');
    };
    if (!(await deps.store.stat(keys.archive))) unusable('its workspace archive is not in the object store');
    if (!(await deps.store.stat(keys.state))) unusable('its state was not captured');
    let doc: SnapshotStateDocument;
    try {
      doc = JSON.parse(await streamText(await deps.store.get(keys.state))) as SnapshotStateDocument;
    } catch (err) {
      return unusable(`its state document cannot be read: ${(err as Error).message}`);
    }
    if (!doc?.state) unusable('its state document is empty');

    const target = new Workspace(deps.workspaceRoot, org, run_id).dir;
    const staging = `${target}.restore-${randomBytes(4).toString('hex')}`;
    await mkdir(dirname(target), { recursive: true });
    let restored;
    const ctx = Context.current();
    const beat = beater();
    // Heartbeats as the archive streams in, so a long restore is not taken for a dead one, and a
    // cancelled or timed-out attempt stops reading instead of racing its retry for the workspace.
    const counted = new ByteCounter((bytes) => beat({ phase: 'archive', bytes }));
    const source = await deps.store.get(keys.archive);
    const abort = (): void => {
      counted.destroy(new Error('restore cancelled'));
    };
    ctx.cancellationSignal.addEventListener('abort', abort);
    try {
      restored = await restoreArchive(source.pipe(counted), staging, { maxBytes: deps.maxBytes });
      ctx.cancellationSignal.throwIfAborted();
      await rm(target, { recursive: true, force: true });
      await rename(staging, target);
    } catch (err) {
      await rm(staging, { recursive: true, force: true });
      if (err instanceof Error && err.name === 'ArchiveRefused') unusable(err.message);
      throw err;
    } finally {
      ctx.cancellationSignal.removeEventListener('abort', abort);
    }
    // Only calls at or after the fork point can come up again; earlier steps are never re-run.
    const reusable = doc.recorded_effects.filter((e) => (stepOfKey(e.key) ?? -1) >= doc.state.step).map((e) => e.key);
    return { state: doc.state, reusable_keys: reusable, files: restored.files, bytes: restored.bytes };
  };
}

/** A whole stream as UTF-8 text (small objects only). */
export async function streamText(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
  return Buffer.concat(chunks).toString('utf8');
}
