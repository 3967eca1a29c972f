import { Controller, Get, Inject, Param, Res, UseGuards } from '@nestjs/common';
import { pipeline } from 'node:stream/promises';
import { ObjectNotFound, type ObjectStore } from '@agentrun/archive';
import { SNAPSHOT_ID_PATTERN, snapshotObjectKeys, type SnapshotList } from '@agentrun/contracts';
import { ReadModel, SnapshotManifest } from '@agentrun/persistence';
import type { Response } from 'express';
import { CurrentOrg, OrgGuard } from './org';
import { ProblemException } from './problem';
import { requireRunId } from './runs.controller';

const snapshotIdRe = new RegExp(SNAPSHOT_ID_PATTERN);

/** The injection token of the object store archives are read from. */
export const OBJECT_STORE = 'agentrun.object-store';

/** A run's snapshot manifest and its archives, one org at a time: another org's run is simply not there. */
@Controller('runs/:id/snapshots')
@UseGuards(OrgGuard)
export class SnapshotsController {
  constructor(
    private readonly readModel: ReadModel,
    private readonly manifest: SnapshotManifest,
    @Inject(OBJECT_STORE) private readonly store: ObjectStore,
  ) {}

  /** The manifest in the order rows landed; each row as its `snapshot_captured` event published it. */
  @Get()
  async list(@CurrentOrg() org: string, @Param('id') id: string): Promise<SnapshotList> {
    await this.requireRun(org, id);
    return { run_id: id, items: (await this.manifest.list(org, id)).map((s) => s.row) };
  }

  /** The workspace archive (tar in gzip), streamed from the object store. */
  @Get(':snapshotId/archive')
  async archive(@CurrentOrg() org: string, @Param('id') id: string, @Param('snapshotId') snapshotId: string, @Res() res: Response): Promise<void> {
    await this.requireRun(org, id);
    if (!snapshotIdRe.test(snapshotId)) throw new ProblemException(400, 'bad snapshot id', `snapshot id must match ${SNAPSHOT_ID_PATTERN}`);
    const found = await this.manifest.find(org, id, snapshotId);
    if (!found) throw new ProblemException(404, 'snapshot not found', `run '${id}' has no snapshot '${snapshotId}'`);
    if (!found.row.bundle_object_url) {
      throw new ProblemException(404, 'no archive', `snapshot '${snapshotId}' has no archive (${found.row.capture_status}${found.row.capture_reason ? `: ${found.row.capture_reason}` : ''})`);
    }
    const key = snapshotObjectKeys(org, id, snapshotId).archive;
    let body;
    try {
      body = await this.store.get(key);
    } catch (err) {
      if (err instanceof ObjectNotFound) throw new ProblemException(410, 'archive gone', `the archive of snapshot '${snapshotId}' is no longer in the object store`);
      throw err;
    }
    const size = (await this.store.stat(key))?.bytes;
    res.status(200);
    res.setHeader('Content-Type', 'application/gzip');
    res.setHeader('Content-Disposition', `attachment; filename="${id}-${snapshotId}.tar.gz"`);
    if (size !== undefined) res.setHeader('Content-Length', String(size));
    // A client that goes away ends the read; nothing else depends on it.
    await pipeline(body, res).catch(() => undefined);
  }

  private async requireRun(org: string, id: string): Promise<void> {
    if (!(await this.readModel.getRun(org, requireRunId(id)))) throw new ProblemException(404, 'run not found', `no run '${id}' in org ${org}`);
  }
}
