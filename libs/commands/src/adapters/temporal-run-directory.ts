import { status as grpcStatus } from '@grpc/grpc-js';
import { WorkflowNotFoundError, WorkflowUpdateFailedError, type Client, type WorkflowHandle } from '@temporalio/client';
import { IllegalStateError, WorkflowExecutionAlreadyStartedError, type SearchAttributePair } from '@temporalio/common';
import { workflowIdFor, type RunKind } from '@agentrun/contracts';
import {
  AGENT_STATUS_KEY,
  AgentRun,
  approveUpdate,
  cancelEvalSignal,
  cancelRunSignal,
  changeGoalUpdate,
  raiseBudgetUpdate,
  CURRENT_STEP_KEY,
  EvalRun,
  evalStatusQuery,
  injectContextSignal,
  ORG_KEY,
  OWNER_KEY,
  pauseSignal,
  resumeSignal,
  RUN_KIND_KEY,
  RUN_PARENT_KEY,
  TRACEPARENT_MEMO,
  type EvalRunState,
} from '@agentrun/workflows';
import { currentTraceparent, processMetrics } from '@agentrun/telemetry';
import { looksUnreachable, RunAlreadyStartedError, RunNotFoundError, TransientCommandError, UpdateRefusedError } from '../errors';
import type { RunDirectoryPort, RunSignal, RunUpdate, RunView, StartRunRequest } from '../ports';

/** Where the id of the command that started a run is kept, to recognise our own earlier start. */
const START_COMMAND_MEMO = 'start_command_id';
const KIND_OF_WORKFLOW_TYPE: Record<string, RunKind> = { AgentRun: 'agent', EvalRun: 'eval' };
const TRANSIENT_GRPC = new Set<number>([grpcStatus.UNAVAILABLE, grpcStatus.DEADLINE_EXCEEDED, grpcStatus.RESOURCE_EXHAUSTED, grpcStatus.ABORTED, grpcStatus.UNKNOWN]);

function isUnavailable(err: unknown): boolean {
  const code = (err as { code?: unknown } | undefined)?.code ?? (err as { cause?: { code?: unknown } } | undefined)?.cause?.code;
  if (typeof code === 'number') return TRANSIENT_GRPC.has(code);
  return looksUnreachable(err);
}

/** The SDK's errors as the ports name them; anything else is left as it is. */
function portErrorOf(err: unknown): unknown {
  if (err instanceof WorkflowNotFoundError) return new RunNotFoundError(err.message);
  if (err instanceof WorkflowExecutionAlreadyStartedError) return new RunAlreadyStartedError(err.message);
  if (err instanceof WorkflowUpdateFailedError) return new UpdateRefusedError(err.cause?.message ?? err.message);
  if (isUnavailable(err)) return new TransientCommandError(`temporal unavailable: ${(err as Error).message}`);
  return err;
}

/** The run directory over a Temporal client. */
export class TemporalRunDirectory implements RunDirectoryPort {
  /**
   * `client` is read on each call, so the client may connect after this is built. `local`, in a process
   * that runs the workflow worker too, is a client on that worker's connection (undefined while it is
   * not running): starts go through it and ask for an eager start, so the first task skips the
   * server's matching and the worker's poll.
   */
  constructor(
    private readonly client: () => Client,
    private readonly local?: () => Client | undefined,
  ) {
    // Declared from the start, so a scrape shows the family before the first start.
    processMetrics().workflowStarts();
  }

  async start(request: StartRunRequest): Promise<void> {
    const { org, runId, workflow, attributes } = request;
    const typedSearchAttributes: SearchAttributePair[] = [
      { key: ORG_KEY, value: org },
      { key: RUN_KIND_KEY, value: workflow.kind },
      { key: AGENT_STATUS_KEY, value: 'queued' },
      ...(attributes.current_step !== undefined ? [{ key: CURRENT_STEP_KEY, value: attributes.current_step }] : []),
      ...(attributes.parent_run_id ? [{ key: RUN_PARENT_KEY, value: attributes.parent_run_id }] : []),
      ...(attributes.owner ? [{ key: OWNER_KEY, value: attributes.owner }] : []),
    ];
    const traceparent = currentTraceparent();
    const options = {
      workflowId: workflowIdFor(org, runId),
      taskQueue: request.taskQueue,
      // A replayed start after the run closed starts nothing.
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      workflowIdConflictPolicy: 'FAIL',
      memo: { ...request.memo, [START_COMMAND_MEMO]: request.commandId, ...(traceparent ? { [TRACEPARENT_MEMO]: traceparent } : {}) },
      typedSearchAttributes,
    } as const;
    const startWith = (client: Client, eager: boolean) =>
      this.call(async () => {
        const asked = { ...options, ...(eager ? { requestEagerStart: true } : {}) };
        const started = workflow.kind === 'agent' ? await client.workflow.start(AgentRun, { ...asked, args: [workflow.input] }) : await client.workflow.start(EvalRun, { ...asked, args: [workflow.input] });
        return started.eagerlyStarted === true;
      });
    const local = this.local?.();
    let eagerly: boolean;
    try {
      eagerly = await startWith(local ?? this.client(), local !== undefined);
    } catch (err) {
      // The local workers' connection closed under the start (they are stopping): the request never
      // left, so it goes through the server's client. Had it left, the second is refused as a duplicate.
      if (local === undefined || !(err instanceof IllegalStateError)) throw err;
      eagerly = await startWith(this.client(), false);
    }
    processMetrics().workflowStarts().inc({ eager: String(eagerly) });
  }

  async describe(org: string, runId: string): Promise<RunView | undefined> {
    try {
      const description = await this.call(() => this.handle(org, runId).describe());
      const memo = (description.memo ?? {}) as Record<string, unknown>;
      const startedBy = memo[START_COMMAND_MEMO];
      return {
        kind: KIND_OF_WORKFLOW_TYPE[description.type],
        execution: description.status.name.toLowerCase(),
        status: description.typedSearchAttributes.get(AGENT_STATUS_KEY),
        startCommandId: typeof startedBy === 'string' ? startedBy : undefined,
        memo,
      };
    } catch (err) {
      if (err instanceof RunNotFoundError) return undefined;
      throw err;
    }
  }

  async signal(org: string, runId: string, signal: RunSignal): Promise<void> {
    const handle = this.handle(org, runId);
    const { command_id } = signal;
    await this.call(() => {
      switch (signal.name) {
        case 'pause':
          return handle.signal(pauseSignal, { command_id });
        case 'resume':
          return handle.signal(resumeSignal, { command_id });
        case 'cancel_run':
          return handle.signal(cancelRunSignal, { command_id });
        case 'cancel_eval':
          return handle.signal(cancelEvalSignal, { command_id });
        case 'inject_context':
          return handle.signal(injectContextSignal, { command_id, text: signal.text });
      }
    });
  }

  async update(org: string, runId: string, update: RunUpdate): Promise<string> {
    const handle = this.handle(org, runId);
    // The command id doubles as the update id, so a retried command is one update.
    const updateId = update.command_id;
    return this.call(() => {
      switch (update.name) {
        case 'change_goal':
          return handle.executeUpdate(changeGoalUpdate, { args: [{ command_id: update.command_id, goal: update.goal }], updateId });
        case 'approve':
          return handle.executeUpdate(approveUpdate, { args: [{ command_id: update.command_id, reviewer: update.reviewer }], updateId });
        case 'raise_budget': {
          const { command_id, max_tokens, max_cost_usd } = update;
          return handle.executeUpdate(raiseBudgetUpdate, { args: [{ command_id, ...(max_tokens !== undefined ? { max_tokens } : {}), ...(max_cost_usd !== undefined ? { max_cost_usd } : {}) }], updateId });
        }
      }
    });
  }

  async evalStatus(org: string, runId: string): Promise<EvalRunState> {
    return this.call(() => this.handle(org, runId).query(evalStatusQuery));
  }

  private handle(org: string, runId: string): WorkflowHandle {
    return this.client().workflow.getHandle(workflowIdFor(org, runId));
  }

  private async call<T>(send: () => Promise<T>): Promise<T> {
    try {
      return await send();
    } catch (err) {
      throw portErrorOf(err);
    }
  }
}
