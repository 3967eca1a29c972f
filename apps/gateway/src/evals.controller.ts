import { Controller, Get, HttpCode, Inject, Param, Post, Query, Req, Res, UseGuards } from '@nestjs/common';
import { ApiBody, ApiConsumes, ApiOperation, ApiQuery, ApiResponse, ApiTags } from '@nestjs/swagger';
import { CASE_ERROR_TYPES, CASE_STATUSES, RUN_ID_PATTERN } from '@agentrun/contracts';
import { DatasetCatalog } from '@agentrun/commands';
import { CASE_ID_PATTERN, SCORER_NAMES, compareCases, DatasetError, listSuites, parseDatasetLines, type EvalCase } from '@agentrun/evals';
import { EvalStore, ReadModel, type StoredDataset } from '@agentrun/persistence';
import type { Request, Response } from 'express';
import { createInterface } from 'node:readline';
import { Transform, type Readable } from 'node:stream';
import { ApiJson, ApiOrgScoped, ApiProblems, ApiRunIdParam } from './api-docs';
import { CurrentOrg, OrgGuard } from './org';
import { ProblemException } from './problem';
import { requireRunId } from './runs.controller';

/** An upload is read as a stream and refused past this many bytes. */
export const MAX_DATASET_BYTES = 50 * 1024 * 1024;
const DATASET_NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const caseIdRe = new RegExp(CASE_ID_PATTERN);
const JSONL_TYPES = ['application/x-ndjson', 'application/jsonl', 'application/json-lines', 'text/plain'];
/** Cases a JSONL export reads from Postgres at a time. */
const EXPORT_PAGE = 200;

interface EvalRunRow {
  kind: string;
  state: { dataset_id?: string; suite?: string } & Record<string, unknown>;
}

/** Counts the bytes flowing through and fails the stream past the limit, so a large upload is never held whole. */
function capped(source: Readable, limit: number): Readable {
  let seen = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _enc, done) {
      seen += chunk.length;
      if (seen > limit) done(new TooLarge(limit));
      else done(null, chunk);
    },
  });
  source.on('error', (err) => counter.destroy(err));
  return source.pipe(counter);
}

class TooLarge extends Error {
  constructor(readonly limit: number) {
    super(`the dataset is larger than ${limit} bytes`);
  }
}

/**
 * Real evaluations over HTTP: datasets (upload and list), an eval run's case results (pages, or JSONL for
 * export) and the comparison of two evals over the same dataset. Org-scoped like every route.
 */
@ApiTags('evals')
@ApiOrgScoped()
@Controller()
@UseGuards(OrgGuard)
export class EvalsController {
  /** The shipped suites are files of this build: read and parsed once, not on every listing. */
  private readonly suites = listSuites();

  constructor(
    private readonly readModel: ReadModel,
    private readonly evals: EvalStore,
    @Inject(DatasetCatalog) private readonly catalog: DatasetCatalog,
  ) {}

  @Post('datasets')
  @HttpCode(201)
  @ApiOperation({ summary: 'Upload a dataset: JSONL, one case per line, streamed (up to 50 MB)' })
  @ApiQuery({ name: 'name', required: true, description: 'the name evals use for it; uploading new cases under a name makes the newest version', schema: { type: 'string', pattern: DATASET_NAME_RE.source } })
  @ApiConsumes(...JSONL_TYPES)
  @ApiBody({ description: 'one case per line: {"id", "input", "target", "metadata"?, "files"?}; a line that is not a case is a 400 naming it', schema: { type: 'string' } })
  @ApiJson(201, 'the stored dataset: its content hash (`id`), name and size', { $ref: '#/components/schemas/Dataset' })
  @ApiProblems(400, 413, 415)
  async upload(@CurrentOrg() org: string, @Query('name') name: string | undefined, @Req() req: Request): Promise<StoredDataset> {
    if (!name || !DATASET_NAME_RE.test(name)) throw new ProblemException(400, 'bad dataset name', `?name= is required and must match ${DATASET_NAME_RE.source}`);
    const type = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
    if (!JSONL_TYPES.includes(type)) throw new ProblemException(415, 'unsupported media type', `send the dataset as JSONL (Content-Type ${JSONL_TYPES.join(', ')})`);
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > MAX_DATASET_BYTES) throw new ProblemException(413, 'payload too large', `the dataset is ${declared} bytes; the limit is ${MAX_DATASET_BYTES}`);
    let cases: EvalCase[];
    try {
      const lines = createInterface({ input: capped(req, MAX_DATASET_BYTES), crlfDelay: Infinity });
      cases = await parseDatasetLines(lines);
    } catch (err) {
      if (err instanceof TooLarge) throw new ProblemException(413, 'payload too large', err.message);
      if (err instanceof DatasetError) throw new ProblemException(400, 'invalid dataset', err.message);
      throw err;
    }
    return this.catalog.save(org, name, cases, 'upload');
  }

  @Get('datasets')
  @ApiOperation({ summary: "The org's uploaded datasets (newest first) and the suites shipped with the platform" })
  @ApiJson(200, 'datasets and suites', { $ref: '#/components/schemas/DatasetList' })
  async list(@CurrentOrg() org: string): Promise<{ datasets: StoredDataset[]; suites: ReturnType<typeof listSuites> }> {
    return { datasets: await this.evals.listDatasets(org), suites: this.suites };
  }

  @Get('runs/:id/results')
  @ApiOperation({ summary: "An eval run's finished cases: input, target, output, scores, usage (pages by case id, or all as JSONL)" })
  @ApiRunIdParam()
  @ApiQuery({ name: 'status', required: false, schema: { type: 'string', enum: [...CASE_STATUSES] } })
  @ApiQuery({ name: 'error_type', required: false, schema: { type: 'string', enum: [...CASE_ERROR_TYPES] } })
  @ApiQuery({ name: 'scorer', required: false, description: 'only cases this scorer gave less than 1', schema: { type: 'string', enum: [...SCORER_NAMES] } })
  @ApiQuery({ name: 'after', required: false, description: "the previous page's `next_after`: cases are in case-id order", schema: { type: 'string', pattern: CASE_ID_PATTERN } })
  @ApiQuery({ name: 'limit', required: false, schema: { type: 'integer', minimum: 1, maximum: 500, default: 50 } })
  @ApiQuery({ name: 'format', required: false, description: '`jsonl` streams every matching case, one per line', schema: { type: 'string', enum: ['json', 'jsonl'] } })
  @ApiResponse({
    status: 200,
    description: 'a page of case results; with format=jsonl every matching case, one JSON object per line',
    content: { 'application/json': { schema: { $ref: '#/components/schemas/CaseResultPage' } }, 'application/x-ndjson': { schema: { type: 'string' } } },
  })
  @ApiProblems(400, 404, 409)
  async results(
    @CurrentOrg() org: string,
    @Param('id') id: string,
    @Res({ passthrough: true }) res: Response,
    @Query('status') status?: string,
    @Query('error_type') errorType?: string,
    @Query('scorer') scorer?: string,
    @Query('after') afterText?: string,
    @Query('limit') limitText?: string,
    @Query('format') format?: string,
  ): Promise<unknown> {
    await this.requireEval(org, id);
    if (status !== undefined && !(CASE_STATUSES as readonly string[]).includes(status)) throw new ProblemException(400, 'bad status', `status must be one of ${CASE_STATUSES.join(', ')}`);
    if (errorType !== undefined && !(CASE_ERROR_TYPES as readonly string[]).includes(errorType)) throw new ProblemException(400, 'bad error_type', `error_type must be one of ${CASE_ERROR_TYPES.join(', ')}`);
    if (scorer !== undefined && !(SCORER_NAMES as readonly string[]).includes(scorer)) throw new ProblemException(400, 'bad scorer', `scorer must be one of ${SCORER_NAMES.join(', ')}`);
    if (format !== undefined && format !== 'json' && format !== 'jsonl') throw new ProblemException(400, 'bad format', 'format must be json or jsonl');
    const filters = { ...(status ? { status } : {}), ...(errorType ? { error_type: errorType } : {}), ...(scorer ? { scorer_below_1: scorer } : {}) };
    if (afterText !== undefined && !caseIdRe.test(afterText)) throw new ProblemException(400, 'bad after', `after is a case id (${CASE_ID_PATTERN}), the previous page's next_after`);
    // Checked whatever the format (the export pages on its own), so a bad limit is never silently ignored.
    const limit = limitText === undefined ? 50 : Number(limitText);
    if (!Number.isInteger(limit) || limit < 1 || limit > 500) throw new ProblemException(400, 'bad limit', 'limit must be an integer from 1 to 500');
    let after = afterText;
    if (format === 'jsonl') {
      res.status(200);
      res.setHeader('Content-Type', 'application/x-ndjson');
      res.setHeader('Content-Disposition', `attachment; filename="${id}-results.jsonl"`);
      for (;;) {
        const page = await this.evals.caseResults(org, id, filters, after, EXPORT_PAGE);
        for (const row of page.cases) if (!res.write(`${JSON.stringify(row)}\n`)) await new Promise((resolve) => res.once('drain', resolve));
        if (!page.next || res.destroyed) break;
        after = page.next;
      }
      res.end();
      return undefined;
    }
    const page = await this.evals.caseResults(org, id, filters, after, limit);
    return { run_id: id, cases: page.cases, next_after: page.next ?? null };
  }

  @Get('runs/:id/compare')
  @ApiOperation({ summary: 'Compare an eval with another over the same dataset: each case improved, regressed, unchanged, added or removed, and the mean difference with a bootstrap 95% interval' })
  @ApiRunIdParam()
  @ApiQuery({ name: 'with', required: true, description: 'the baseline eval run', schema: { type: 'string', pattern: RUN_ID_PATTERN } })
  @ApiJson(200, 'the comparison', { $ref: '#/components/schemas/EvalComparison' })
  @ApiProblems(400, 404, 409)
  async compare(@CurrentOrg() org: string, @Param('id') id: string, @Query('with') other: string | undefined): Promise<unknown> {
    if (!other) throw new ProblemException(400, 'missing baseline', '?with= names the eval run to compare with');
    const current = await this.requireEval(org, id);
    const baseline = await this.requireEval(org, requireRunId(other));
    const [a, b] = [current.state.dataset_id, baseline.state.dataset_id];
    if (!a || !b) throw new ProblemException(409, 'no dataset', `run '${!a ? id : other}' is a synthetic eval: only evals over a dataset compare`);
    if (a !== b) throw new ProblemException(409, 'different datasets', `run '${id}' evaluated dataset ${a} and run '${other}' dataset ${b}: only evals over the same dataset compare`);
    const comparison = compareCases(await this.evals.caseScores(org, id), await this.evals.caseScores(org, other));
    return { run_id: id, with: other, dataset_id: a, ...comparison };
  }

  private async requireEval(org: string, id: string): Promise<EvalRunRow> {
    const run = (await this.readModel.getRun(org, requireRunId(id))) as unknown as EvalRunRow | undefined;
    if (!run) throw new ProblemException(404, 'run not found', `no run '${id}' in org ${org}`);
    if (run.kind !== 'eval') throw new ProblemException(409, 'not an eval', `run '${id}' is an agent run; results and comparisons are for eval runs`);
    return run;
  }
}
