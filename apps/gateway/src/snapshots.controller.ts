import { Controller, Get, Inject, Param, Res, UseGuards } from '@nestjs/common';
import { ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { pipeline } from 'node:stream/promises';
import { concatParts, ObjectNotFound, SegmentUnreadable, trajectoryParts, type ObjectStore } from '@agentrun/archive';
import { SNAPSHOT_ID_PATTERN, snapshotObjectKeys, trajectorySegmentKey, type SnapshotList } from '@agentrun/contracts';
import { ReadModel, SnapshotManifest } from '@agentrun/persistence';
import type { Response } from 'express';
import { ApiJson, ApiOrgScoped, ApiProblems, ApiRunIdParam } from './api-docs';
import { CurrentOrg, OrgGuard } from './org';
import { ProblemException } from './problem';
import { publicSnapshotRow } from './public-views';
import { requireRunId } from './runs.controller';

const snapshotIdRe = new RegExp(SNAPSHOT_ID_PATTERN);

/** The injection token of the object store archives are read from. */
export const OBJECT_STORE = 'agentrun.object-store';

/** A run's snapshot manifest and its archives, one org at a time: another org's run is simply not there. */
@ApiTags('snapshots')
@ApiOrgScoped()
@Controller('runs/:id/snapshots')
@UseGuards(OrgGuard)
export class SnapshotsController {
  constructor(
    private readonly readModel: ReadModel,
    private readonly manifest: SnapshotManifest,
    @Inject(OBJECT_STORE) private readonly store: ObjectStore,
  ) {}

  /**
   * The manifest in the order rows landed; each row as its `snapshot_captured` event published it,
   * except where the objects are: `bundle_object_url` is the archive's download link here.
   */
  @Get()
  @ApiOperation({ summary: "A run's snapshot manifest, in capture order" })
  @ApiRunIdParam()
  @ApiJson(
    200,
    "the manifest rows, as their snapshot_captured events published them, but for the objects' locations: `bundle_object_url` is the archive's download link (`/runs/{id}/snapshots/{snapshot_id}/archive`), the trajectory and fork-state locations are left out",
    { $ref: '#/components/schemas/SnapshotList' },
  )
  @ApiProblems(404)
  async list(@CurrentOrg() org: string, @Param('id') id: string): Promise<SnapshotList> {
    await this.requireRun(org, id);
    return { run_id: id, items: (await this.manifest.list(org, id)).map((s) => publicSnapshotRow(id, s.row)) };
  }

  /** The workspace archive (tar in gzip), streamed from the object store. */
  @Get(':snapshotId/archive')
  @ApiOperation({ summary: "A snapshot's workspace archive (tar in gzip)" })
  @ApiRunIdParam()
  @ApiRunIdParam('snapshotId', 'the snapshot id')
  @ApiResponse({ status: 200, description: 'the archive, streamed', content: { 'application/gzip': { schema: { type: 'string', format: 'binary' } } } })
  @ApiProblems(404, 410)
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

  /**
   * The run's events up to the snapshot, one JSON per line: its trajectory segments read back one
   * after another (or, for a snapshot taken before segments, its one whole object). What the first
   * bytes promise is checked before they are sent: every segment is there and chains back to seq 1.
   */
  @Get(':snapshotId/trajectory')
  @ApiOperation({ summary: "A snapshot's trajectory: the run's events up to the capture, one JSON per line" })
  @ApiRunIdParam()
  @ApiRunIdParam('snapshotId', 'the snapshot id')
  @ApiResponse({ status: 200, description: 'the trajectory, streamed', content: { 'application/x-ndjson': { schema: { type: 'string' } } } })
  @ApiProblems(404, 410)
  async trajectory(@CurrentOrg() org: string, @Param('id') id: string, @Param('snapshotId') snapshotId: string, @Res() res: Response): Promise<void> {
    await this.requireRun(org, id);
    if (!snapshotIdRe.test(snapshotId)) throw new ProblemException(400, 'bad snapshot id', `snapshot id must match ${SNAPSHOT_ID_PATTERN}`);
    const found = await this.manifest.find(org, id, snapshotId);
    if (!found) throw new ProblemException(404, 'snapshot not found', `run '${id}' has no snapshot '${snapshotId}'`);
    const { row } = found;
    if (!row.trajectory_s3_uri) {
      throw new ProblemException(404, 'no trajectory', `snapshot '${snapshotId}' has no trajectory (${row.capture_status}${row.capture_reason ? `: ${row.capture_reason}` : ''})`);
    }
    let parts;
    try {
      parts = await trajectoryParts(this.store, {
        log: { keyOf: (lastSeq) => trajectorySegmentKey(org, id, lastSeq) },
        ...(row.trajectory_last_seq !== undefined ? { lastSeq: row.trajectory_last_seq } : {}),
        wholeKey: snapshotObjectKeys(org, id, snapshotId).trajectory,
      });
    } catch (err) {
      if (err instanceof SegmentUnreadable) throw new ProblemException(410, 'trajectory gone', `the trajectory of snapshot '${snapshotId}' is no longer whole in the object store`);
      throw err;
    }
    res.status(200);
    res.setHeader('Content-Type', 'application/x-ndjson');
    res.setHeader('Content-Disposition', `attachment; filename="${id}-${snapshotId}.trajectory.jsonl"`);
    res.setHeader('Content-Length', String(parts.reduce((sum, part) => sum + part.bytes, 0)));
    // A client that goes away ends the read; nothing else depends on it.
    await pipeline(concatParts(this.store, parts), res).catch(() => undefined);
  }

  private async requireRun(org: string, id: string): Promise<void> {
    if (!(await this.readModel.getRun(org, requireRunId(id)))) throw new ProblemException(404, 'run not found', `no run '${id}' in org ${org}`);
  }
}
