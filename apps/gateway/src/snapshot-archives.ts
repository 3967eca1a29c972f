import { Inject, Injectable } from '@nestjs/common';
import type { Readable } from 'node:stream';
import { ObjectNotFound, type ObjectStore } from '@agentrun/archive';
import { SNAPSHOT_ID_PATTERN, snapshotObjectKeys, type RunSummary, type SnapshotRow } from '@agentrun/contracts';
import { ReadModel, SnapshotManifest } from '@agentrun/persistence';
import { ProblemException } from './problem';
import { requireRunId } from './runs.controller';

const snapshotIdRe = new RegExp(SNAPSHOT_ID_PATTERN);

/** How a row's capture ended, for a problem's detail: `failed: capture_timeout_1s`. */
export function captureOf(row: SnapshotRow): string {
  return `${row.capture_status}${row.capture_reason ? `: ${row.capture_reason}` : ''}`;
}

/** The injection token of the object store archives are read from. */
export const OBJECT_STORE = 'agentrun.object-store';

/** A run's snapshots' archives, one org at a time: another org's run or snapshot is a 404, as none is. */
@Injectable()
export class SnapshotArchives {
  constructor(
    private readonly readModel: ReadModel,
    private readonly manifest: SnapshotManifest,
    @Inject(OBJECT_STORE) readonly store: ObjectStore,
  ) {}

  async requireRun(org: string, id: string): Promise<RunSummary> {
    const run = await this.readModel.getRun(org, requireRunId(id));
    if (!run) throw new ProblemException(404, 'run not found', `no run '${id}' in org ${org}`);
    return run;
  }

  /** The snapshot's manifest row, once the run and the snapshot are found in this org (400 for a bad id, 404 otherwise). */
  async row(org: string, id: string, snapshotId: string): Promise<SnapshotRow> {
    await this.requireRun(org, id);
    if (!snapshotIdRe.test(snapshotId)) throw new ProblemException(400, 'bad snapshot id', `snapshot id must match ${SNAPSHOT_ID_PATTERN}`);
    const found = await this.manifest.find(org, id, snapshotId);
    if (!found) throw new ProblemException(404, 'snapshot not found', `run '${id}' has no snapshot '${snapshotId}'`);
    return found.row;
  }

  /** The snapshot's archive key, once the run and a row with an archive are found (404 otherwise). */
  async archiveKey(org: string, id: string, snapshotId: string): Promise<string> {
    const row = await this.row(org, id, snapshotId);
    if (!row.bundle_object_url) throw new ProblemException(404, 'no archive', `snapshot '${snapshotId}' has no archive (${captureOf(row)})`);
    return snapshotObjectKeys(org, id, snapshotId).archive;
  }

  /** The archive as it streams from the object store (410 when it is gone). */
  async open(key: string, snapshotId: string): Promise<Readable> {
    try {
      return await this.store.get(key);
    } catch (err) {
      if (err instanceof ObjectNotFound) throw new ProblemException(410, 'archive gone', `the archive of snapshot '${snapshotId}' is no longer in the object store`);
      throw err;
    }
  }

  /** The run's final snapshot with an archive, if it has one. */
  async finalSnapshot(org: string, id: string): Promise<string | undefined> {
    const rows = await this.manifest.list(org, id);
    return rows.map((r) => r.row).filter((r) => r.is_final && r.bundle_object_url).at(-1)?.snapshot_id;
  }
}
