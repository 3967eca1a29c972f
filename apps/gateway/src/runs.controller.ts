import { Controller, Get, Inject, Param, Query, UseGuards } from '@nestjs/common';
import { ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { RUN_ID_PATTERN, RUN_KINDS, RUN_STATUSES } from '@agentrun/contracts';
import { storageProblem } from '@agentrun/contracts/validation';
import { CursorCodec, CursorError, ReadModel, type RunCursor } from '@agentrun/persistence';
import type { RunConversation, RunDetail, RunsPage } from '@agentrun/contracts';
import { ApiJson, ApiOrgScoped, ApiProblems, ApiRunIdParam } from './api-docs';
import { CurrentOrg, OrgGuard } from './org';
import { ProblemException } from './problem';
import { publicEvent } from './public-views';
import { PLATFORM_CONFIG } from '@agentrun/runtime';
import type { GatewayConfig } from './config';

const runIdRe = new RegExp(RUN_ID_PATTERN);

export function requireRunId(id: string): string {
  if (!runIdRe.test(id)) throw new ProblemException(400, 'bad run id', `run id must match ${RUN_ID_PATTERN}`);
  return id;
}

function oneOf(name: string, value: string | undefined, allowed: readonly string[]): string | undefined {
  if (value === undefined) return undefined;
  if (!allowed.includes(value)) throw new ProblemException(400, 'bad filter', `${name} must be one of ${allowed.join(', ')}`);
  return value;
}

@ApiTags('runs')
@ApiOrgScoped()
@Controller('runs')
@UseGuards(OrgGuard)
export class RunsController {
  constructor(
    private readonly readModel: ReadModel,
    private readonly cursors: CursorCodec,
    @Inject(PLATFORM_CONFIG) private readonly config: GatewayConfig,
  ) {}

  /** Newest first, one org, keyset-paged by an opaque signed cursor. */
  @Get()
  @ApiOperation({ summary: "The org's runs, newest first, a page at a time" })
  @ApiQuery({ name: 'kind', required: false, schema: { enum: [...RUN_KINDS] } })
  @ApiQuery({ name: 'status', required: false, schema: { enum: [...RUN_STATUSES] } })
  @ApiQuery({ name: 'model', required: false, description: 'runs of this model only', schema: { type: 'string', minLength: 1, maxLength: 200, pattern: '^[^\\u0000]*$' } })
  @ApiQuery({ name: 'cursor', required: false, description: "the previous page's `next_cursor`, opaque and signed", schema: { type: 'string' } })
  @ApiQuery({ name: 'limit', required: false, schema: { type: 'integer', minimum: 1, maximum: 200, default: 20 } })
  @ApiJson(200, 'a page of runs and the cursor of the next', { $ref: '#/components/schemas/RunPage' })
  async list(
    @CurrentOrg() org: string,
    @Query('kind') kind?: string,
    @Query('status') status?: string,
    @Query('model') model?: string,
    @Query('cursor') cursor?: string,
    @Query('limit') limitText?: string,
  ): Promise<RunsPage> {
    for (const [name, value] of Object.entries({ kind, status, model, cursor, limit: limitText })) {
      if (value !== undefined && typeof value !== 'string') throw new ProblemException(400, 'bad query', `${name} may be given once`);
    }
    const limit = limitText === undefined ? 20 : Number(limitText);
    if (!Number.isInteger(limit) || limit < 1 || limit > 200) {
      throw new ProblemException(400, 'bad limit', 'limit must be an integer from 1 to 200');
    }
    // Counted in characters (code points), as the eval.start schema counts the model it stores,
    // so every model a run can have can be filtered on.
    if (model !== undefined && (model.length === 0 || [...model].length > 200)) {
      throw new ProblemException(400, 'bad filter', 'model must be 1-200 characters');
    }
    // A NUL reached Postgres as a parameter and came back as a 500; no stored model contains one.
    const unstorable = model === undefined ? undefined : storageProblem(model, 'model');
    if (unstorable) throw new ProblemException(400, 'bad filter', unstorable);
    let after: RunCursor | undefined;
    if (cursor !== undefined) {
      try {
        after = this.cursors.decode(cursor);
      } catch (err) {
        if (err instanceof CursorError) throw new ProblemException(400, 'bad cursor', `${err.message}; start again without a cursor`);
        throw err;
      }
      // The signature proves we issued it, not to whom: another org's cursor would page this org's
      // runs from a position it learned elsewhere.
      if (after.org !== org) throw new ProblemException(400, 'bad cursor', 'cursor was not issued to this org; start again without a cursor');
    }
    const page = await this.readModel.listRuns(
      org,
      { kind: oneOf('kind', kind, RUN_KINDS), status: oneOf('status', status, RUN_STATUSES), model },
      after,
      limit,
    );
    return { runs: page.runs, next_cursor: page.next ? this.cursors.encode({ ...page.next, org }) : null };
  }

  @Get(':id')
  @ApiOperation({ summary: 'A run, its latest state and its last events' })
  @ApiRunIdParam()
  @ApiJson(200, 'the run', { $ref: '#/components/schemas/RunDetail' })
  @ApiProblems(404)
  async get(@CurrentOrg() org: string, @Param('id') id: string): Promise<RunDetail> {
    const run = await this.readModel.getRun(org, requireRunId(id));
    if (!run) throw new ProblemException(404, 'run not found', `no run '${id}' in org ${org}`);
    return { ...run, last_events: (await this.readModel.lastEvents(org, id, this.config.RUN_LAST_EVENTS)).map(publicEvent) };
  }

  @Get(':id/conversation')
  @ApiOperation({ summary: "An `llm` agent run's conversation: system, user, assistant, tool calls and tool results, each with its step, from the run's events" })
  @ApiRunIdParam()
  @ApiJson(200, 'the messages so far (running runs too), in order', { $ref: '#/components/schemas/RunConversation' })
  @ApiProblems(404, 409)
  async conversation(@CurrentOrg() org: string, @Param('id') id: string): Promise<RunConversation> {
    const run = await this.readModel.getRun(org, requireRunId(id));
    if (!run) throw new ProblemException(404, 'run not found', `no run '${id}' in org ${org}`);
    if (run.kind !== 'agent') throw new ProblemException(409, 'no conversation', `run '${id}' is ${run.kind === 'eval' ? 'an eval' : `a ${run.kind} run`}; only agent runs have a conversation`);
    const answer = run.state?.answer;
    return { run_id: id, status: run.status, ...(typeof answer === 'string' ? { answer } : {}), messages: await this.readModel.conversation(org, id) };
  }
}
