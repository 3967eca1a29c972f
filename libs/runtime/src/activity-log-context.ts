import { Logger } from '@nestjs/common';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import { runOfWorkflowId, withLogContext, type LogContext } from '@agentrun/telemetry';

const logger = new Logger('activity');

const text = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);

/**
 * The run an activity works for, for its log lines: `org` and `run_id` from its input when it carries
 * them (every agent, eval and snapshot activity does), else from the workflow id (`{org}/{run_id}`,
 * a child's `{org}/{run_id}/research/3`); `command_id` when the input has one.
 */
export function activityLogContext(workflowId: string | undefined, args: readonly unknown[]): LogContext {
  const input = (args[0] !== null && typeof args[0] === 'object' ? args[0] : {}) as Record<string, unknown>;
  const run = runOfWorkflowId(workflowId);
  return { org: text(input.org) ?? run?.org, run_id: text(input.run_id) ?? run?.run_id, command_id: text(input.command_id) };
}

/**
 * Runs every activity inside the log context of its run, so each line it (or the code it calls)
 * writes carries `org` and `run_id`; says at debug level when an attempt starts and completes. A
 * failed attempt is logged by the Temporal SDK itself, so it is not repeated here.
 */
export const logContextInterceptor: ActivityInterceptorsFactory = (ctx) => ({
  inbound: {
    execute: (input, next) => {
      const { activityType, attempt, workflowExecution } = ctx.info;
      return withLogContext(activityLogContext(workflowExecution?.workflowId, input.args), async () => {
        const started = Date.now();
        logger.debug(`${activityType} started (attempt ${attempt})`);
        const result = await next(input);
        logger.debug(`${activityType} completed in ${Date.now() - started} ms (attempt ${attempt})`);
        return result;
      });
    },
  },
});
