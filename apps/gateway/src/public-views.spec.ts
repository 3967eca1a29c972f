import type { RunEventEnvelope, SnapshotRow } from '@agentrun/contracts';
import { archiveLink, trajectoryLink, publicEvent, publicSnapshotRow } from './public-views';

const row: SnapshotRow = {
  snapshot_id: 'snap-0002',
  turn: 2,
  id: 'run-1-workspace',
  version: 2,
  bundle_object_url: 'file:///srv/agentrun/.stack/data/objects/snapshots/acme/run-1/snap-0002/workspace.tar.gz',
  bytes: 1234,
  source_agent_name: 'AgentRun',
  source_context_id: 'run-1',
  elapsed_s: 1.5,
  captured_at_utc: '2026-01-01T00:00:00.000Z',
  is_final: false,
  capture_status: 'ok',
  trajectory_s3_uri: 's3://agentrun-prod-objects/snapshots/acme/run-1/snap-0002/trajectory.jsonl',
  env_universe_id: 's3://agentrun-prod-objects/snapshots/acme/run-1/snap-0002/state.json',
  env_universe_version: 2,
  step: 4,
};

describe('what HTTP shows of a snapshot row', () => {
  it("gives the archive's and the trajectory's links where the row named the objects, and leaves out the fork state's location", () => {
    const shown = publicSnapshotRow('run-1', row);
    expect(shown.bundle_object_url).toBe('/runs/run-1/snapshots/snap-0002/archive');
    expect(shown.trajectory_s3_uri).toBe('/runs/run-1/snapshots/snap-0002/trajectory');
    expect(shown).not.toHaveProperty('env_universe_id');
    expect(JSON.stringify(shown)).not.toMatch(/file:|s3:|\/srv\//);
    const expected: Partial<SnapshotRow> = { ...row, bundle_object_url: archiveLink('run-1', 'snap-0002'), trajectory_s3_uri: trajectoryLink('run-1', 'snap-0002') };
    delete expected.env_universe_id;
    expect(shown).toEqual(expected);
  });

  it('keeps a row without an archive without one, so it still reads as unusable', () => {
    const failed: SnapshotRow = { ...row, capture_status: 'failed', capture_reason: 'workspace_too_large' };
    delete failed.bundle_object_url;
    expect(publicSnapshotRow('run-1', failed)).not.toHaveProperty('bundle_object_url');
  });

  it('rewrites the row of a snapshot_captured event and leaves every other event as it is', () => {
    const base = { org: 'acme', run_id: 'run-1', kind: 'agent', ts: '2026-01-01T00:00:00.000Z' };
    const captured = { ...base, seq: 9, event_id: 'e-9', type: 'snapshot_captured', payload: { snapshot: row } } as unknown as RunEventEnvelope;
    const shown = publicEvent(captured);
    expect((shown.payload as { snapshot: SnapshotRow }).snapshot).toEqual(publicSnapshotRow('run-1', row));
    expect({ ...shown, payload: undefined }).toEqual({ ...captured, payload: undefined });
    // The event as stored (and as Kafka carries it) is not touched.
    expect((captured.payload as { snapshot: SnapshotRow }).snapshot.bundle_object_url).toMatch(/^file:/);
    const step = { ...base, seq: 3, event_id: 'e-3', type: 'step_completed', payload: { output: 'file:///tmp/x' } } as unknown as RunEventEnvelope;
    expect(publicEvent(step)).toBe(step);
  });
});
