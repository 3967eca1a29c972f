import { Controller, Get, Inject, Param, Query, Res, UseGuards } from '@nestjs/common';
import { ApiOperation, ApiParam, ApiQuery, ApiResponse, ApiTags } from '@nestjs/swagger';
import { basename, extname } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ArchiveFileNotFound, ArchiveFileTooLarge, ArchiveRefused, BadArchivePath, checkArchivePath, concatParts, listArchive, openArchiveFile, SegmentUnreadable, trajectoryParts } from '@agentrun/archive';
import { snapshotObjectKeys, trajectorySegmentKey, type SnapshotFileList, type SnapshotList } from '@agentrun/contracts';
import { SnapshotManifest } from '@agentrun/persistence';
import { PLATFORM_CONFIG } from '@agentrun/runtime';
import type { Response } from 'express';
import type { GatewayConfig } from './config';
import { ApiJson, ApiOrgScoped, ApiProblems, ApiRunIdParam, ApiSnapshotIdParam } from './api-docs';
import { CurrentOrg, OrgGuard } from './org';
import { ProblemException } from './problem';
import { captureOf, SnapshotArchives } from './snapshot-archives';
import { publicSnapshotRow } from './public-views';

/** Text as text/plain (HTML and SVG too: shown, never rendered), a few binary kinds as themselves, the rest as bytes. */
const TEXT_EXTENSIONS = new Set(['.txt', '.md', '.log', '.py', '.ts', '.tsx', '.js', '.jsx', '.mjs', '.cjs', '.css', '.html', '.htm', '.svg', '.xml', '.yaml', '.yml', '.toml', '.ini', '.cfg', '.sh', '.csv', '.tsv', '.rs', '.go', '.java', '.c', '.h', '.cpp', '.rb', '.sql', '.diff', '.patch']);
const BINARY_TYPES: Record<string, string> = { '.json': 'application/json', '.png': 'image/png', '.jpg': 'image/jpeg', '.jpeg': 'image/jpeg', '.gif': 'image/gif', '.webp': 'image/webp', '.pdf': 'application/pdf', '.gz': 'application/gzip', '.zip': 'application/zip' };


export { OBJECT_STORE } from './snapshot-archives';

/** A run's snapshot manifest and its archives, one org at a time: another org's run is simply not there. */
@ApiTags('snapshots')
@ApiOrgScoped()
@Controller('runs/:id/snapshots')
@UseGuards(OrgGuard)
export class SnapshotsController {
  constructor(
    private readonly manifest: SnapshotManifest,
    private readonly archives: SnapshotArchives,
    @Inject(PLATFORM_CONFIG) private readonly config: GatewayConfig,
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
    const { key, body } = await this.archiveOf(org, id, snapshotId);
    const size = (await this.archives.store.stat(key))?.bytes;
    res.status(200);
    res.setHeader('Content-Type', 'application/gzip');
    res.setHeader('Content-Disposition', `attachment; filename="${id}-${snapshotId}.tar.gz"`);
    if (size !== undefined) res.setHeader('Content-Length', String(size));
    // A client that goes away ends the read; nothing else depends on it.
    await pipeline(body, res).catch(() => undefined);
  }

  /** The archive's entries, a page at a time, read as it streams from the object store (never extracted). */
  @Get(':snapshotId/files')
  @ApiOperation({ summary: "A snapshot's workspace files: the archive's entries in archive order, a page at a time" })
  @ApiRunIdParam()
  @ApiSnapshotIdParam()
  @ApiQuery({ name: 'after', required: false, description: "the previous page's `next_after` (how many entries came before the page)", schema: { type: 'string', pattern: '^[0-9]{1,9}$' } })
  @ApiQuery({ name: 'limit', required: false, schema: { type: 'integer', minimum: 1, maximum: 1000, default: 200 } })
  @ApiJson(200, 'a page of entries (path, type, size, mode, mtime, link)', { $ref: '#/components/schemas/SnapshotFileList' })
  @ApiProblems(404, 410)
  async files(@CurrentOrg() org: string, @Param('id') id: string, @Param('snapshotId') snapshotId: string, @Query('after') after?: unknown, @Query('limit') limitText?: unknown): Promise<SnapshotFileList> {
    for (const [name, value] of Object.entries({ after, limit: limitText })) {
      if (value !== undefined && typeof value !== 'string') throw new ProblemException(400, 'bad query', `${name} may be given once`);
    }
    if (typeof after === 'string' && !/^[0-9]{1,9}$/.test(after)) throw new ProblemException(400, 'bad after', "after must be a page's next_after: a whole number of entries");
    const limit = limitText === undefined ? 200 : Number(limitText);
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new ProblemException(400, 'bad limit', 'limit must be an integer from 1 to 1000');
    const { body } = await this.archiveOf(org, id, snapshotId);
    const page = await this.reading(snapshotId, () => listArchive(body, { limit, ...(typeof after === 'string' ? { after: Number(after) } : {}) }));
    return { run_id: id, snapshot_id: snapshotId, items: page.entries, ...(page.next_after !== undefined ? { next_after: page.next_after } : {}) };
  }

  /** One file of the archive, found as the archive streams; past SNAPSHOT_FILE_MAX_BYTES a 413 with its size. */
  @Get(':snapshotId/files/*path')
  @ApiOperation({ summary: "One file of a snapshot's workspace, its bytes as they are in the archive" })
  @ApiRunIdParam()
  @ApiSnapshotIdParam()
  @ApiParam({ name: 'path', required: true, description: "the file's path in the workspace (as the file list gives it); no `..`, not absolute, no NUL", schema: { type: 'string' } })
  @ApiResponse({
    status: 200,
    description: "the file's bytes, with a content type by its extension (text as text/plain; a few image and document types as themselves; anything else as application/octet-stream)",
    content: Object.fromEntries(['application/octet-stream', 'text/plain', ...new Set(Object.values(BINARY_TYPES))].map((type) => [type, { schema: { type: 'string', format: 'binary' } }])),
  })
  @ApiProblems(404, 410, 413)
  async file(@CurrentOrg() org: string, @Param('id') id: string, @Param('snapshotId') snapshotId: string, @Param('path') pathParam: string[] | string, @Res() res: Response): Promise<void> {
    const asked = Array.isArray(pathParam) ? pathParam.join('/') : String(pathParam);
    let path: string;
    try {
      path = checkArchivePath(asked);
    } catch (err) {
      if (err instanceof BadArchivePath) throw new ProblemException(400, 'bad path', err.message);
      throw err;
    }
    const { body } = await this.archiveOf(org, id, snapshotId);
    const max = this.config.SNAPSHOT_FILE_MAX_BYTES;
    const file = await this.reading(snapshotId, () => openArchiveFile(body, path, max));
    res.status(200);
    res.setHeader('Content-Type', contentTypeOf(path));
    res.setHeader('Content-Length', String(file.entry.size));
    // Workspace files are the agent's output, not ours: never run as a page of the gateway's origin.
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Content-Security-Policy', "sandbox; default-src 'none'");
    res.setHeader('Content-Disposition', `inline; filename*=UTF-8''${encodeURIComponent(basename(path))}`);
    // A client that goes away ends the read; nothing else depends on it.
    await pipeline(Readable.from(file.data), res).catch(() => file.close());
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
    const row = await this.archives.row(org, id, snapshotId);
    if (!row.trajectory_s3_uri) throw new ProblemException(404, 'no trajectory', `snapshot '${snapshotId}' has no trajectory (${captureOf(row)})`);
    let parts;
    try {
      parts = await trajectoryParts(this.archives.store, {
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
    await pipeline(concatParts(this.archives.store, parts), res).catch(() => undefined);
  }

  /** The snapshot's archive as it streams from the object store: the run and snapshot in this org, or a 404/410. */
  private async archiveOf(org: string, id: string, snapshotId: string): Promise<{ key: string; body: Readable }> {
    const key = await this.archives.archiveKey(org, id, snapshotId);
    return { key, body: await this.archives.open(key, snapshotId) };
  }

  /** Reads an archive, answering what it says of itself as problems: no such file, too large, unreadable. */
  private async reading<T>(snapshotId: string, read: () => Promise<T>): Promise<T> {
    try {
      return await read();
    } catch (err) {
      if (err instanceof ArchiveFileNotFound) throw new ProblemException(404, 'file not found', `snapshot '${snapshotId}': ${err.message}`);
      if (err instanceof ArchiveFileTooLarge) throw new ProblemException(413, 'file too large', `${err.message} (SNAPSHOT_FILE_MAX_BYTES); download the archive instead`, { size: err.size, max_bytes: err.max });
      if (err instanceof ArchiveRefused) throw new ProblemException(410, 'archive unreadable', `the archive of snapshot '${snapshotId}' cannot be read: ${err.message}`);
      throw err;
    }
  }

  private async requireRun(org: string, id: string): Promise<void> {
    await this.archives.requireRun(org, id);
  }
}

function contentTypeOf(path: string): string {
  const ext = extname(path).toLowerCase();
  if (TEXT_EXTENSIONS.has(ext) || ext === '' && /^(readme|license|makefile|dockerfile)$/i.test(basename(path))) return 'text/plain; charset=utf-8';
  return BINARY_TYPES[ext] ?? 'application/octet-stream';
}
