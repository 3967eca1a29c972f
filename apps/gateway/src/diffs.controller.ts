import { Controller, Get, Param, Query, UseGuards } from '@nestjs/common';
import { ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { ArchiveRefused, diffArchives, type ArchiveDiff } from '@agentrun/archive';
import { RUN_ID_PATTERN, type RunDiff, type RunSummary, type SnapshotDiff } from '@agentrun/contracts';
import { lineUpRuns, readRunSteps } from '@agentrun/persistence';
import { Database } from '@agentrun/runtime';
import { ApiJson, ApiOrgScoped, ApiProblems, ApiRunIdParam, ApiSnapshotIdParam } from './api-docs';
import { CurrentOrg, OrgGuard } from './org';
import { ProblemException } from './problem';
import { SnapshotArchives } from './snapshot-archives';

const runIdRe = new RegExp(RUN_ID_PATTERN);

/** How two runs are related when one is the other's fork (its `run_started` says where from). */
function forkOf(a: RunSummary, b: RunSummary): { parent: string; child: string } | undefined {
  if (a.parent_run_id === b.run_id) return { parent: b.run_id, child: a.run_id };
  if (b.parent_run_id === a.run_id) return { parent: a.run_id, child: b.run_id };
  return undefined;
}

/** Where a run and another differ: two snapshots' workspaces, and two agent runs step by step. */
@ApiTags('diffs')
@ApiOrgScoped()
@Controller('runs/:id')
@UseGuards(OrgGuard)
export class DiffsController {
  constructor(
    private readonly archives: SnapshotArchives,
    private readonly db: Database,
  ) {}

  @Get('snapshots/:snapshotId/diff/:otherId')
  @ApiOperation({ summary: "Two snapshots' workspaces compared: files added, removed and changed, with unified diffs of changed text files" })
  @ApiRunIdParam()
  @ApiSnapshotIdParam('snapshotId', 'the snapshot compared from')
  @ApiSnapshotIdParam('otherId', 'the snapshot compared to')
  @ApiQuery({ name: 'run', required: false, description: "the run `otherId` is a snapshot of, when not this one: this run's parent or one of its forks", schema: { type: 'string', pattern: RUN_ID_PATTERN } })
  @ApiJson(200, 'the comparison', { $ref: '#/components/schemas/SnapshotDiff' })
  @ApiProblems(404, 409, 410)
  async snapshots(@CurrentOrg() org: string, @Param('id') id: string, @Param('snapshotId') snapshotId: string, @Param('otherId') otherId: string, @Query('run') runParam?: unknown): Promise<SnapshotDiff> {
    if (runParam !== undefined && (typeof runParam !== 'string' || !runIdRe.test(runParam))) throw new ProblemException(400, 'bad run', `run must be one run id matching ${RUN_ID_PATTERN}`);
    const otherRun = runParam ?? id;
    const run = await this.archives.requireRun(org, id);
    if (otherRun !== id) {
      const other = await this.archives.requireRun(org, otherRun);
      if (!forkOf(run, other)) throw new ProblemException(409, 'not related', `run '${otherRun}' is neither the parent nor a fork of run '${id}': snapshots are compared within a run, or between a parent and its fork`);
    }
    const files = await this.compare(org, { run: id, snapshot: snapshotId }, { run: otherRun, snapshot: otherId });
    return { run_id: id, snapshot_id: snapshotId, with: { run_id: otherRun, snapshot_id: otherId }, files };
  }

  @Get('diff')
  @ApiOperation({ summary: 'Two agent runs of the org lined up by step: the first step where they differ, the steps shared, and their final workspaces compared' })
  @ApiRunIdParam()
  @ApiQuery({ name: 'with', required: true, description: 'the other agent run', schema: { type: 'string', pattern: RUN_ID_PATTERN } })
  @ApiJson(200, 'the line-up', { $ref: '#/components/schemas/RunDiff' })
  @ApiProblems(404, 409, 410)
  async runs(@CurrentOrg() org: string, @Param('id') id: string, @Query('with') withParam?: unknown): Promise<RunDiff> {
    if (typeof withParam !== 'string' || !runIdRe.test(withParam)) throw new ProblemException(400, 'bad with', `with must be one run id matching ${RUN_ID_PATTERN}`);
    const [run, other] = [await this.archives.requireRun(org, id), await this.archives.requireRun(org, withParam)];
    for (const r of [run, other]) if (r.kind !== 'agent') throw new ProblemException(409, 'not an agent run', `run '${r.run_id}' is ${r.kind === 'eval' ? 'an eval' : `a ${r.kind} run`}: only agent runs are lined up by step`);
    const [mine, theirs] = [await readRunSteps(this.db.dataSource, org, id), await readRunSteps(this.db.dataSource, org, withParam)];
    const lineUp = lineUpRuns(mine, theirs);
    const related = forkOf(run, other);
    const forkedFrom = related && (related.child === id ? mine : theirs).forked_from;
    const [finalA, finalB] = [await this.archives.finalSnapshot(org, id), await this.archives.finalSnapshot(org, withParam)];
    return {
      run_id: id,
      with: withParam,
      ...lineUp,
      ...(related && forkedFrom ? { fork: { ...related, snapshot_id: forkedFrom.snapshot_id, step: forkedFrom.step } } : {}),
      final_files:
        finalA && finalB ? { snapshots: { run: finalA, with: finalB }, files: await this.compare(org, { run: id, snapshot: finalA }, { run: withParam, snapshot: finalB }) } : null,
    };
  }

  /** Two snapshots' archives compared as they stream from the object store. */
  private async compare(org: string, a: { run: string; snapshot: string }, b: { run: string; snapshot: string }): Promise<ArchiveDiff> {
    const keys = { a: await this.archives.archiveKey(org, a.run, a.snapshot), b: await this.archives.archiveKey(org, b.run, b.snapshot) };
    try {
      return await diffArchives((side) => this.archives.open(keys[side], side === 'a' ? a.snapshot : b.snapshot));
    } catch (err) {
      if (err instanceof ArchiveRefused) throw new ProblemException(410, 'archive unreadable', `an archive compared cannot be read: ${err.message}`);
      throw err;
    }
  }
}
