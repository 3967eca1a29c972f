import { Body, Controller, Headers, HttpCode, Param, Post, UseGuards } from '@nestjs/common';
import { COMMAND_ID_PATTERN, type CommandAccepted, type CommandOutcome, type CommandType, type RejectionReason } from '@agentrun/contracts';
import { checkCommand } from '@agentrun/contracts/validation';
import { CommandService, TransientCommandError } from '@agentrun/commands';
import { ReadModel } from '@agentrun/persistence';
import { randomUUID } from 'node:crypto';
import { CurrentOrg, OrgGuard } from './org';
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
};

/** The control routes and the command each sends. */
const CONTROL_ROUTES: Record<string, CommandType> = {
  pause: 'agent.pause',
  resume: 'agent.resume',
  cancel: 'agent.cancel',
  'inject-context': 'agent.inject_context',
  'change-goal': 'agent.change_goal',
  approve: 'eval.approve',
  'retry-failed': 'eval.retry_failed',
  fork: 'agent.fork',
};

/**
 * HTTP writes go through the same command library as Kafka commands: same validation, same ledger,
 * same outcome record. `Idempotency-Key` becomes the command id.
 */
@Controller()
@UseGuards(OrgGuard)
export class CommandsController {
  constructor(
    private readonly commands: CommandService,
    private readonly readModel: ReadModel,
  ) {}

  @Post('agents')
  @HttpCode(202)
  async startAgent(@CurrentOrg() org: string, @Headers('idempotency-key') key: string | undefined, @Body() body: unknown): Promise<CommandAccepted> {
    const { run_id, ...payload } = asObject(body);
    return this.send(org, key, 'agent.start', newRunId(run_id, 'agent'), payload);
  }

  @Post('evals')
  @HttpCode(202)
  async startEval(@CurrentOrg() org: string, @Headers('idempotency-key') key: string | undefined, @Body() body: unknown): Promise<CommandAccepted> {
    const { run_id, ...payload } = asObject(body);
    return this.send(org, key, 'eval.start', newRunId(run_id, 'eval'), payload);
  }

  @Post('runs/:id/:action')
  @HttpCode(202)
  async control(
    @CurrentOrg() org: string,
    @Param('id') id: string,
    @Param('action') action: string,
    @Headers('idempotency-key') key: string | undefined,
    @Body() body: unknown,
  ): Promise<CommandAccepted> {
    let type = Object.prototype.hasOwnProperty.call(CONTROL_ROUTES, action) ? CONTROL_ROUTES[action] : undefined;
    if (!type) throw new ProblemException(404, 'no such action', `'${action}' is not one of ${Object.keys(CONTROL_ROUTES).join(', ')}`);
    // One cancel route for both kinds: the run's kind picks the command.
    if (type === 'agent.cancel' && (await this.readModel.getRun(org, requireRunId(id)))?.kind === 'eval') type = 'eval.cancel';
    if (type === 'agent.fork') {
      // The route names the run forked from; the fork is a new run, its id given or made up.
      const { run_id, ...rest } = body === undefined ? {} : asObject(body);
      return this.send(org, key, type, newRunId(run_id, 'agent'), { ...rest, from_run_id: requireRunId(id) });
    }
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
    let outcome: CommandOutcome;
    try {
      outcome = await this.commands.handle(reading.command);
    } catch (err) {
      if (err instanceof TransientCommandError) throw new ProblemException(503, 'temporarily unavailable', 'the workflow service did not answer; retry with the same Idempotency-Key');
      throw err;
    }
    if (outcome.outcome === 'rejected') {
      const reason = outcome.reason ?? 'internal_error';
      throw new ProblemException(STATUS_FOR_REASON[reason], reason.replace(/_/g, ' '), outcome.message ?? reason, {
        reason,
        command_id: outcome.command_id,
      });
    }
    return { command_id: outcome.command_id, run_id: outcome.run_id, outcome: outcome.outcome, ...(outcome.message ? { message: outcome.message } : {}) };
  }
}

/** The `run_id` a start names, or a new one. Not coerced: `{"run_id": null}` or a number is a mistake, not a run called "null". */
function newRunId(value: unknown, kind: 'agent' | 'eval'): string {
  if (value === undefined) return `${kind}-${randomUUID()}`;
  if (typeof value !== 'string') throw new ProblemException(400, 'bad run id', `run_id must be a string (got ${value === null ? 'null' : typeof value})`);
  return requireRunId(value);
}

function asObject(body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new ProblemException(400, 'bad request', 'the request body must be a JSON object');
  }
  return body as Record<string, unknown>;
}
