import { applyDecorators, Body, Controller, Headers, HttpCode, Param, Post, UseGuards } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { COMMAND_ID_PATTERN, RUN_ID_PATTERN, type CommandAccepted, type CommandOutcome, type CommandType, type RejectionReason } from '@agentrun/contracts';
import { checkCommand } from '@agentrun/contracts/validation';
import { CommandService, NO_REVIEWERS, TransientCommandError } from '@agentrun/commands';
import { ReadModel } from '@agentrun/persistence';
import { randomUUID } from 'node:crypto';
import { ApiCommandBody, ApiIdempotencyKey, ApiJson, ApiOrgScoped, ApiProblems, ApiRunIdParam } from './api-docs';
import { CurrentCaller, CurrentOrg, OrgGuard, type Caller } from './org';
import { ProblemException } from './problem';
import { requireRunId } from './runs.controller';

const commandIdRe = new RegExp(COMMAND_ID_PATTERN);

/** How a rejection reads over HTTP. */
const STATUS_FOR_REASON: Record<RejectionReason, number> = {
  invalid_payload: 400,
  unknown_type: 400,
  unknown_run: 404,
  run_exists: 409,
  wrong_kind: 409,
  run_closed: 409,
  validator_rejected: 422,
  not_a_reviewer: 422,
  nothing_to_retry: 409,
  run_active: 409,
  not_supported: 501,
  internal_error: 500,
  unknown_snapshot: 404,
  snapshot_unusable: 409,
  unknown_dataset: 404,
  invalid_eval: 422,
  // The sender may retry once the org has room (runs finish); not a mistake in the request itself.
  quota_exceeded: 429,
  // Kafka only: HTTP commands are authenticated by the gateway's own token check, never by a command key.
  unauthorized: 401,
};


const newRunIdProperty = { run_id: { type: 'string', pattern: RUN_ID_PATTERN, description: "the new run's id; made up (kind-uuid) when absent" } };
const ACCEPTED = ApiJson(202, 'accepted, or a duplicate of a command already accepted (same Idempotency-Key)', { $ref: '#/components/schemas/Accepted' });

/** What an eval start must name over HTTP although the payload schema leaves it optional: see the run starter. */
const REVIEWERS_REQUIRED = {
  type: 'array',
  minItems: 1,
  maxItems: 50,
  items: { type: 'string', minLength: 1, maxLength: 200, pattern: '^[^\\u0000]*$' },
  description: 'who may approve the run (token subjects); at least one: an eval without reviewers is refused (400)',
};

const APPROVE_REVIEWER = {
  type: 'string',
  minLength: 1,
  maxLength: 200,
  pattern: '^[^\\u0000]*$',
  description:
    "signed in by a token: leave it out (the token's subject approves) or name that subject; anyone else is a 403. Local mode's X-Org (no token): required, and taken as given",
};

/** What a route that sends a command to an existing run documents. */
function ApiControl(summary: string, type: CommandType): MethodDecorator {
  return applyDecorators(ApiOperation({ summary }), ApiRunIdParam(), ApiIdempotencyKey(), ApiCommandBody(type), ACCEPTED, ApiProblems(404, 409, 413, 415, 422, 503));
}

/**
 * HTTP writes go through the same command library as Kafka commands: same validation, same ledger,
 * same outcome record. `Idempotency-Key` becomes the command id. One route per command, so each
 * documents its own body.
 */
@ApiTags('commands')
@ApiOrgScoped()
@Controller()
@UseGuards(OrgGuard)
export class CommandsController {
  constructor(
    private readonly commands: CommandService,
    private readonly readModel: ReadModel,
  ) {}

  @Post('agents')
  @HttpCode(202)
  @ApiOperation({ summary: 'Start an agent run' })
  @ApiIdempotencyKey()
  @ApiCommandBody('agent.start', newRunIdProperty)
  @ACCEPTED
  @ApiProblems(409, 413, 415, 429, 503)
  async startAgent(@CurrentOrg() org: string, @Headers('idempotency-key') key: string | undefined, @Body() body: unknown): Promise<CommandAccepted> {
    const { run_id, ...payload } = asObject(body);
    return this.send(org, key, 'agent.start', newRunId(run_id, 'agent'), payload);
  }

  @Post('evals')
  @HttpCode(202)
  @ApiOperation({ summary: 'Start an evaluation run' })
  @ApiIdempotencyKey()
  @ApiCommandBody('eval.start', newRunIdProperty, { reviewers: REVIEWERS_REQUIRED })
  @ACCEPTED
  @ApiProblems(404, 409, 413, 415, 422, 429, 503)
  async startEval(@CurrentOrg() org: string, @Headers('idempotency-key') key: string | undefined, @Body() body: unknown): Promise<CommandAccepted> {
    const { run_id, ...payload } = asObject(body);
    return this.send(org, key, 'eval.start', newRunId(run_id, 'eval'), payload);
  }

  @Post('runs/:id/pause')
  @HttpCode(202)
  @ApiControl('Pause an agent run', 'agent.pause')
  async pause(@CurrentOrg() org: string, @Param('id') id: string, @Headers('idempotency-key') key: string | undefined, @Body() body: unknown): Promise<CommandAccepted> {
    return this.control(org, id, key, body, 'agent.pause');
  }

  @Post('runs/:id/resume')
  @HttpCode(202)
  @ApiControl('Resume a paused agent run', 'agent.resume')
  async resume(@CurrentOrg() org: string, @Param('id') id: string, @Headers('idempotency-key') key: string | undefined, @Body() body: unknown): Promise<CommandAccepted> {
    return this.control(org, id, key, body, 'agent.resume');
  }

  @Post('runs/:id/cancel')
  @HttpCode(202)
  @ApiControl('Cancel a run, agent or eval', 'agent.cancel')
  async cancel(@CurrentOrg() org: string, @Param('id') id: string, @Headers('idempotency-key') key: string | undefined, @Body() body: unknown): Promise<CommandAccepted> {
    // One cancel route for both kinds: the run's kind picks the command.
    const kind = (await this.readModel.getRun(org, requireRunId(id)))?.kind;
    return this.control(org, id, key, body, kind === 'eval' ? 'eval.cancel' : 'agent.cancel');
  }

  @Post('runs/:id/inject-context')
  @HttpCode(202)
  @ApiControl('Add context to an agent run', 'agent.inject_context')
  async injectContext(@CurrentOrg() org: string, @Param('id') id: string, @Headers('idempotency-key') key: string | undefined, @Body() body: unknown): Promise<CommandAccepted> {
    return this.control(org, id, key, body, 'agent.inject_context');
  }

  @Post('runs/:id/change-goal')
  @HttpCode(202)
  @ApiControl("Change an agent run's goal (422 when the workflow's validator refuses it)", 'agent.change_goal')
  async changeGoal(@CurrentOrg() org: string, @Param('id') id: string, @Headers('idempotency-key') key: string | undefined, @Body() body: unknown): Promise<CommandAccepted> {
    return this.control(org, id, key, body, 'agent.change_goal');
  }

  @Post('runs/:id/raise-budget')
  @HttpCode(202)
  @ApiControl(
    "Raise a run's budget to new totals (max_tokens, max_cost_usd), agent or eval; a run paused on its budget goes on. 422 when a limit is not higher than the run's, or the org's monthly budget does not allow it",
    'agent.raise_budget',
  )
  async raiseBudget(@CurrentOrg() org: string, @Param('id') id: string, @Headers('idempotency-key') key: string | undefined, @Body() body: unknown): Promise<CommandAccepted> {
    // One route for both kinds, as for cancel: the run's kind picks the command.
    const kind = (await this.readModel.getRun(org, requireRunId(id)))?.kind;
    return this.control(org, id, key, body, kind === 'eval' ? 'eval.raise_budget' : 'agent.raise_budget');
  }

  @Post('runs/:id/approve')
  @HttpCode(202)
  @ApiOperation({
    summary:
      "Approve an eval run awaiting review as the token's subject (403 for a token without a subject or a body naming someone else; 422 unless the subject is a listed reviewer)",
  })
  @ApiRunIdParam()
  @ApiIdempotencyKey()
  @ApiCommandBody('eval.approve', { reviewer: APPROVE_REVIEWER })
  @ACCEPTED
  @ApiProblems(403, 404, 409, 413, 415, 422, 503)
  async approve(@CurrentCaller() caller: Caller, @Param('id') id: string, @Headers('idempotency-key') key: string | undefined, @Body() body: unknown): Promise<CommandAccepted> {
    const payload = body === undefined ? {} : asObject(body);
    return this.send(caller.org, key, 'eval.approve', requireRunId(id), approvalPayload(caller, payload));
  }

  @Post('runs/:id/retry-failed')
  @HttpCode(202)
  @ApiControl('Start {id}-retry-{n} over the failed and ungraded cases (409 when none, or still running)', 'eval.retry_failed')
  @ApiProblems(429)
  async retryFailed(@CurrentOrg() org: string, @Param('id') id: string, @Headers('idempotency-key') key: string | undefined, @Body() body: unknown): Promise<CommandAccepted> {
    return this.control(org, id, key, body, 'eval.retry_failed');
  }

  /** The route names the run forked from; the fork is a new run, its id given or made up. */
  @Post('runs/:id/fork')
  @HttpCode(202)
  @ApiOperation({ summary: 'Start a new agent run from a snapshot of run {id}' })
  @ApiRunIdParam('id', 'the run forked from')
  @ApiIdempotencyKey()
  @ApiCommandBody('agent.fork', {
    ...newRunIdProperty,
    from_run_id: { description: 'ignored, whatever it holds: the path names the run forked from' },
  })
  @ACCEPTED
  @ApiProblems(404, 409, 413, 415, 429, 503)
  async fork(@CurrentOrg() org: string, @Param('id') id: string, @Headers('idempotency-key') key: string | undefined, @Body() body: unknown): Promise<CommandAccepted> {
    const { run_id, ...rest } = body === undefined ? {} : asObject(body);
    return this.send(org, key, 'agent.fork', newRunId(run_id, 'agent'), { ...rest, from_run_id: requireRunId(id) });
  }

  private async control(org: string, id: string, key: string | undefined, body: unknown, type: CommandType): Promise<CommandAccepted> {
    return this.send(org, key, type, requireRunId(id), body === undefined ? {} : asObject(body));
  }

  private async send(org: string, key: string | undefined, type: CommandType, runId: string, payload: Record<string, unknown>): Promise<CommandAccepted> {
    if (key !== undefined && !commandIdRe.test(key)) {
      throw new ProblemException(400, 'bad idempotency key', 'Idempotency-Key must be 1-128 printable ASCII characters');
    }
    const reading = checkCommand({ command_id: key ?? randomUUID(), type, org, run_id: runId, payload });
    if (reading.kind === 'unreadable') throw new ProblemException(400, 'bad request', reading.detail);
    // Over HTTP the body is the payload, so its fields are named without the `payload` prefix.
    if (reading.kind === 'rejected') throw new ProblemException(400, 'invalid request body', reading.message.replace(/(^|; )payload(\.|: )/g, '$1'));
    // The document requires an eval's reviewers (the run starter refuses a start without): refused here
    // as well, before the ledger, so a retried Idempotency-Key is not answered `duplicate` for a body the
    // document refuses. Same answer as the run starter's.
    if (type === 'eval.start' && !hasReviewers(payload)) throw new ProblemException(400, 'invalid payload', NO_REVIEWERS, { reason: 'invalid_payload' });
    let outcome: CommandOutcome;
    try {
      outcome = await this.commands.handle(reading.command);
    } catch (err) {
      if (err instanceof TransientCommandError) throw new ProblemException(503, 'temporarily unavailable', 'the workflow service did not answer; retry with the same Idempotency-Key');
      throw err;
    }
    if (outcome.outcome === 'rejected') {
      const reason = outcome.reason ?? 'internal_error';
      // An internal_error's message is generic; its error_id finds the detail in the logs.
      throw new ProblemException(STATUS_FOR_REASON[reason], reason.replace(/_/g, ' '), outcome.message ?? reason, {
        reason,
        command_id: outcome.command_id,
        ...(outcome.error_id ? { error_id: outcome.error_id } : {}),
      });
    }
    return { command_id: outcome.command_id, run_id: outcome.run_id, outcome: outcome.outcome, ...(outcome.message ? { message: outcome.message } : {}) };
  }
}

/**
 * Who approves. Signed in by a token (bearer or session), the token's subject approves: the body may
 * name it, never someone else, and a token made without a subject cannot approve. Local mode's X-Org
 * authenticates nobody, so there the body's reviewer is taken as given.
 */
export function approvalPayload(caller: Caller, body: Record<string, unknown>): Record<string, unknown> {
  if (caller.via === 'org') return body;
  if (caller.subject === null) {
    throw new ProblemException(
      403,
      'no subject',
      'this token has no subject, so it cannot approve; approve with a token made for the reviewer (`npm run token -- create --org ORG --subject WHO`)',
    );
  }
  // A reviewer that is not even a string is left to the body's validation (a 400).
  if (typeof body.reviewer === 'string' && body.reviewer !== caller.subject) {
    throw new ProblemException(403, 'not the signed-in subject', "an approval is recorded as the token's subject; leave reviewer out, or name the subject the token was made for");
  }
  return body.reviewer === undefined ? { ...body, reviewer: caller.subject } : body;
}

/** The `run_id` a start names, or a new one. Not coerced: `{"run_id": null}` or a number is a mistake, not a run called "null". */
function newRunId(value: unknown, kind: 'agent' | 'eval'): string {
  if (value === undefined) return `${kind}-${randomUUID()}`;
  if (typeof value !== 'string') throw new ProblemException(400, 'bad run id', `run_id must be a string (got ${value === null ? 'null' : typeof value})`);
  return requireRunId(value);
}

/** An eval start's `reviewers`: a list with at least one (checkCommand has checked each is a name). */
function hasReviewers(payload: Record<string, unknown>): boolean {
  return Array.isArray(payload.reviewers) && payload.reviewers.length > 0;
}

function asObject(body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new ProblemException(400, 'bad request', 'the request body must be a JSON object');
  }
  return body as Record<string, unknown>;
}
