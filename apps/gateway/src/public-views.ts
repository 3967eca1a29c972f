import type { RunEventEnvelope, SnapshotRow } from '@agentrun/contracts';

/** Where the gateway serves a snapshot's archive, relative to its own origin. */
export function archiveLink(runId: string, snapshotId: string): string {
  return `/runs/${encodeURIComponent(runId)}/snapshots/${encodeURIComponent(snapshotId)}/archive`;
}

/** Where the gateway serves the trajectory up to a snapshot (its segments read back in order). */
export function trajectoryLink(runId: string, snapshotId: string): string {
  return `${archiveLink(runId, snapshotId).slice(0, -'/archive'.length)}/trajectory`;
}

/**
 * A snapshot row as HTTP shows it. The row as recorded says where the snapshotter put its objects: a
 * `file://` path on a server, or an `s3://` bucket and key. A client can use neither, and they tell
 * it how the servers are laid out, so `bundle_object_url` becomes the archive's download link (still
 * present exactly when the row is usable), `trajectory_s3_uri` the trajectory route's link (the whole
 * trajectory up to the snapshot, where the stored location holds only its last segment), and the
 * fork-state location, which no route serves, is left out. Kafka's `snapshot_captured` events and the
 * stored manifest keep the locations.
 */
export function publicSnapshotRow(runId: string, row: SnapshotRow): SnapshotRow {
  const shown: SnapshotRow = { ...row };
  delete shown.trajectory_s3_uri;
  delete shown.env_universe_id;
  if (row.trajectory_s3_uri) shown.trajectory_s3_uri = trajectoryLink(runId, row.snapshot_id);
  if (row.bundle_object_url) shown.bundle_object_url = archiveLink(runId, row.snapshot_id);
  return shown;
}

/** A run event as HTTP shows it: a `snapshot_captured` event's row as `publicSnapshotRow` makes it, any other event as it is. */
export function publicEvent(event: RunEventEnvelope): RunEventEnvelope {
  if (event.type !== 'snapshot_captured') return event;
  const row = (event.payload as { snapshot?: unknown } | undefined)?.snapshot;
  if (typeof row !== 'object' || row === null || typeof (row as SnapshotRow).snapshot_id !== 'string') return event;
  return { ...event, payload: { ...event.payload, snapshot: publicSnapshotRow(event.run_id, row as SnapshotRow) } } as RunEventEnvelope;
}
