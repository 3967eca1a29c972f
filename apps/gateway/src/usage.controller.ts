import { Controller, Get, Query, UseGuards } from '@nestjs/common';
import { ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { USAGE_GROUPS, type UsageGroup, type UsageReport } from '@agentrun/contracts';
import { ReadModel } from '@agentrun/persistence';
import { ApiJson, ApiOrgScoped, ApiProblems } from './api-docs';
import { CurrentOrg, OrgGuard } from './org';
import { ProblemException } from './problem';

/** The most groups one answer holds (`truncated` says when there were more). */
export const USAGE_MAX_GROUPS = 1_000;
/** The longest range one question may span. */
export const USAGE_MAX_DAYS = 400;
const DAY_MS = 86_400_000;

const DATE_RE = /^\d{4}-\d{2}-\d{2}$/;
// RFC 3339 with an explicit offset: a time without one would mean whatever zone the gateway runs in.
const DATE_TIME_RE = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?([Zz]|[+-]\d{2}:\d{2})$/;
/** The two forms as the document states them: a request that does not match is a 400; one that does but names no real instant, a 422. */
export const BOUND_PATTERN = '^\\d{4}-\\d{2}-\\d{2}([Tt]\\d{2}:\\d{2}(:\\d{2}(\\.\\d{1,9})?)?([Zz]|[+-]\\d{2}:\\d{2}))?$';

/** A `from`/`to` bound: a UTC day (`2026-12-01`, its midnight) or an RFC 3339 date-time with an offset. */
export function parseBound(name: string, value: string): Date {
  const day = DATE_RE.test(value);
  if (!day && !DATE_TIME_RE.test(value)) {
    throw new ProblemException(400, 'bad range', `${name} must be a date (2026-12-01, UTC) or a date-time with an offset (2026-12-01T08:00:00Z), got '${value.slice(0, 40)}'`);
  }
  const at = new Date(day ? `${value}T00:00:00Z` : value);
  // Date accepts 2026-02-31 as March 3rd; a bound that is not the day it names is refused.
  if (Number.isNaN(at.getTime()) || at.getUTCFullYear() < 1970 || at.getUTCFullYear() > 9999 || (day && at.toISOString().slice(0, 10) !== value)) {
    throw new ProblemException(422, 'bad range', `${name} is not a real date or time from 1970 on: '${value.slice(0, 40)}'`);
  }
  return at;
}

/** `[from, to)` from the query: `to` defaults to now, `from` to the start of `to`'s UTC month. */
export function usageRange(fromText: string | undefined, toText: string | undefined, now = new Date()): { from: Date; to: Date } {
  const to = toText === undefined ? now : parseBound('to', toText);
  const from = fromText === undefined ? new Date(Date.UTC(to.getUTCFullYear(), to.getUTCMonth(), 1)) : parseBound('from', fromText);
  if (from.getTime() >= to.getTime()) throw new ProblemException(422, 'bad range', `from (${from.toISOString()}) must be before to (${to.toISOString()})`);
  if (to.getTime() - from.getTime() > USAGE_MAX_DAYS * DAY_MS) throw new ProblemException(422, 'bad range', `a range may span at most ${USAGE_MAX_DAYS} days; ask for it in parts`);
  return { from, to };
}

@ApiTags('usage')
@ApiOrgScoped()
@Controller('usage')
@UseGuards(OrgGuard)
export class UsageController {
  constructor(private readonly readModel: ReadModel) {}

  @Get()
  @ApiOperation({ summary: "The org's model calls in a time range: tokens and cost, added up and grouped by model, run or UTC day" })
  @ApiQuery({ name: 'from', required: false, description: 'inclusive: a UTC date (2026-12-01) or an RFC 3339 date-time with an offset; default the start of the month of `to`', schema: { type: 'string', pattern: BOUND_PATTERN } })
  @ApiQuery({ name: 'to', required: false, description: 'exclusive, in the same forms; default now. At most 400 days after `from`', schema: { type: 'string', pattern: BOUND_PATTERN } })
  @ApiQuery({ name: 'group_by', required: false, schema: { enum: [...USAGE_GROUPS], default: 'model' } })
  @ApiJson(200, 'the totals and the groups, most expensive first', { $ref: '#/components/schemas/UsageReport' })
  @ApiProblems(422)
  async usage(@CurrentOrg() org: string, @Query('from') from?: string, @Query('to') to?: string, @Query('group_by') groupBy?: string): Promise<UsageReport> {
    for (const [name, value] of Object.entries({ from, to, group_by: groupBy })) {
      if (value !== undefined && typeof value !== 'string') throw new ProblemException(400, 'bad query', `${name} may be given once`);
    }
    if (groupBy !== undefined && !(USAGE_GROUPS as readonly string[]).includes(groupBy)) {
      throw new ProblemException(400, 'bad query', `group_by must be one of ${USAGE_GROUPS.join(', ')}`);
    }
    const group: UsageGroup = (groupBy as UsageGroup | undefined) ?? 'model';
    const range = usageRange(from, to);
    const report = await this.readModel.usage(org, range.from, range.to, group, USAGE_MAX_GROUPS);
    return { from: range.from.toISOString(), to: range.to.toISOString(), group_by: group, ...report };
  }
}
