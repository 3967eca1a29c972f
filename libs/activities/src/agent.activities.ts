import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { hostname } from 'node:os';
import type { BudgetLedger, EffectLedger, GpuLeases, RateLimiter } from '@agentrun/persistence';
import type { BudgetShortfall } from '@agentrun/contracts';
import { BUDGET_EXHAUSTED, RATE_LIMIT_WAIT, type AgentActivities, type ModelCall, type ModelReply, type ToolCall, type ToolResult, type WorkspacePlacement } from '@agentrun/workflows';
import { ChatError, type ChatClient, type ChatMessage } from './llm';
import type { EvalCaseSource } from './eval-cases';
import type { ObjectStore } from '@agentrun/archive';
import { stepOfKey } from './effect-keys';
import { inlineOrStore } from './payloads';
import { restoreSnapshotActivity, type RestoreDeps } from './snapshot.activities';
import { applyWrites, packWrites, runStaged, stageWorkspace } from './gpu-staging';
import { toolSpecsFor } from './tool-specs';
import { BadArguments, type Tool } from './tools';
import { Workspace } from './workspace';
import { usageOf, worstCaseOf } from './usage';
import { processMetrics } from '@agentrun/telemetry';
import { TokenStream, type TokenSink } from './token-stream';
import { rateLimitOf, type FaultPoints, type ModelPrices, type ModelRateLimits, type TierWeights } from '@agentrun/config';

export interface AgentActivityDeps {
  workspaceRoot: string;
  effects: EffectLedger;
  /** The tools this worker's lane serves; a call for any other tool is bad arguments. */
  tools: Tool[];
  /** Set on the GPU lane: each tool call holds a GPU lease while it works. */
  gpuLeases?: GpuLeases;
  /** Set where model calls are served. */
  chat?: ChatClient;
  /** A client for a model a run names (an agent eval's model under test); without it every call asks `chat`'s model. */
  chatFor?: (model: string) => ChatClient;
  /** Where an eval case's files come from, for runs seeded from a case; set on the lane that prepares workspaces. */
  cases?: EvalCaseSource;
  /** Where compensations are served: the leases they release. */
  compensations?: GpuLeases;
  /** Simulated accelerator time per tool call (see TOOL_PACE_TICKS); none when absent. */
  pace?: { ticks: number; tickMs: number };
  /** Where a fork's snapshot is restored from; set on the lane that prepares workspaces. */
  snapshots?: Omit<RestoreDeps, 'workspaceRoot'>;
  /** Outputs larger than `inlineMaxBytes` go to this store; history keeps a reference. */
  payloads: { store: ObjectStore; inlineMaxBytes: number };
  /**
   * Set on a workspace host (AGENTRUN_WORKSPACE_HOST_ID): the host and its own queues, given to every run
   * whose workspace this process prepares or restores, so its later workspace work comes back here.
   */
  placement?: WorkspacePlacement;
  /** What model calls cost (AGENTRUN_MODEL_PRICES); without it calls count tokens and cost 0, unpriced. */
  prices?: ModelPrices;
  /** The reservation ledger: set where model calls are made, so each is reserved against the budgets first. */
  budgets?: Pick<BudgetLedger, 'reserve' | 'settle' | 'release'>;
  /** The completion tokens a model call may produce (its `max_tokens`, and its worst case). */
  maxTokens?: number;
  /**
   * Where model calls stream their replies as they are written (`agentrun.run-tokens.v1`); without it a
   * call asks for the whole reply at once. `onError` hears of deltas that could not be sent.
   */
  tokens?: { sink: TokenSink; onError: (err: unknown, dropped: number) => void };
  /**
   * The models' shared rate limits (AGENTRUN_MODEL_RATE_LIMITS), the tiers' weights in them, and the
   * endpoint they are counted under (the model server and the key, never the key itself). Without them,
   * or for a model they do not name, calls go at once.
   */
  rateLimits?: { limiter: Pick<RateLimiter, 'acquire' | 'refund' | 'shrink'>; limits: ModelRateLimits; weights: TierWeights; endpoint: string };
  /** Test-profile fault points (AGENTRUN_FAULTS): `model.lose_completion_every=N` loses every Nth recorded model call's completion. */
  faults?: FaultPoints;
}

/** A model call's completion limit when the deployment sets none. */
export const DEFAULT_MODEL_MAX_TOKENS = 1_024;

/** Who holds a lease: this process on this host. */
const WORKER = `${hostname()}:${process.pid}`;

/**
 * Heartbeats through the paced ticks, starting after the last tick a previous attempt reported,
 * and returns that tick (0 when starting fresh).
 */
async function pace(settings: AgentActivityDeps['pace']): Promise<number> {
  const ctx = Context.current();
  const details = ctx.info.heartbeatDetails as { tick?: unknown } | undefined;
  const from = typeof details?.tick === 'number' ? details.tick : 0;
  if (!settings || settings.tickMs <= 0) return from;
  for (let tick = from; tick < settings.ticks; tick++) {
    ctx.heartbeat({ tick: tick + 1, of: settings.ticks });
    await ctx.sleep(settings.tickMs);
  }
  return from;
}

function notServed(what: string): never {
  throw ApplicationFailure.nonRetryable(`${what} is not served on task queue '${Context.current().info.taskQueue}'`, 'BadArguments');
}

/**
 * Every effect is keyed and written to the ledger last: an attempt that dies half-way leaves no row
 * and the retry redoes the work; an attempt whose completion was lost after the effect finds the row
 * and returns it with `duplicate: true`, spending nothing.
 */
/** A GPU lease for one call: taken while its effect is made. */
interface Lease {
  acquire(): Promise<void>;
  release(): Promise<unknown>;
}

/** Both settled, then the first failure thrown, or both values: neither promise is left unawaited. */
async function both<A, B>(a: Promise<A>, b: Promise<B> | undefined): Promise<[A, B | undefined]> {
  const [x, y] = await Promise.allSettled([a, b]);
  if (x.status === 'rejected') throw x.reason;
  if (y.status === 'rejected') throw y.reason;
  return [x.value, y.value];
}

export function createAgentActivities(deps: AgentActivityDeps): AgentActivities {
  // Declared where model calls are rate limited (the cpu-tools lane), not by every process of this lib.
  const rateLimitWaits = deps.rateLimits ? processMetrics().rateLimitWaits() : undefined;
  const byName = new Map<string, Tool>(deps.tools.map((t) => [t.name, t]));
  const restore = deps.snapshots ? restoreSnapshotActivity({ workspaceRoot: deps.workspaceRoot, ...deps.snapshots }) : undefined;

  /**
   * `lease` (the GPU lane's) is held while the effect is made. It is taken beside the ledger's look-up
   * and given back beside the ledger's write, so each pair costs one round trip's wait, not two: under
   * load every wait holds a GPU slot. A call found in the ledger gives its lease straight back.
   */
  async function once<T extends { duplicate: boolean }>(key: string, effect: string, reuseKey: string | undefined, run: (attempt: number) => Promise<T>, lease?: Lease): Promise<T> {
    const [recorded] = await both(deps.effects.find<T>(key), lease?.acquire());
    let leased = lease !== undefined;
    try {
      if (recorded) return { ...recorded.result, duplicate: true };
      if (reuseKey) {
        // A fork meeting a call its parent made before the fork point: the parent's result, nothing spent.
        // Recorded under the fork's key too (as a reuse, not an effect), so the fork's retries agree.
        const parent = await deps.effects.find<T>(reuseKey);
        if (parent) {
          // Marked `reused`, so what the parent's call cost (its `usage`) is not counted again as this run's.
          const stored = await deps.effects.record(key, `reuse:${effect}`, { ...parent.result, key, reused: true }, Context.current().info.attempt);
          return { ...stored.result, duplicate: true };
        }
      }
      const attempt = Context.current().info.attempt;
      const result = await run(attempt);
      leased = false;
      const [stored] = await both(deps.effects.record(key, effect, result, attempt), lease?.release());
      return stored.duplicate ? { ...stored.result, duplicate: true } : stored.result;
    } finally {
      // A crash skips this; the run's saga compensation releases what a dead attempt held.
      if (leased) await lease?.release();
    }
  }

  return {
    async prepareWorkspace({ org, run_id, goal, seed }) {
      const workspace = new Workspace(deps.workspaceRoot, org, run_id);
      if (seed) {
        // An eval case's workspace: its files as the dataset gives them (paths checked when the dataset was read).
        const evalCase = await (deps.cases ?? notServed('eval case seeds')).load(org, seed.dataset, seed.case_id);
        for (const [path, text] of Object.entries(evalCase.files ?? {})) await workspace.write(path, text);
      }
      await workspace.write('goal.md', `# Goal\n\n${goal}\n`);
      return deps.placement;
    },

    async runTool(call: ToolCall): Promise<ToolResult> {
      const tool = byName.get(call.tool) ?? notServed(`tool '${call.tool}'`);
      // The tool against a workspace root: this host's own, or a staged copy's.
      const runIn = async (root: string) => {
        try {
          return await tool.run(call.args, {
            workspace: new Workspace(root, call.org, call.run_id),
            step: stepOfKey(call.key) ?? 0,
            heartbeat: (progress) => Context.current().heartbeat(progress),
          });
        } catch (err) {
          if (err instanceof BadArguments) throw ApplicationFailure.nonRetryable(err.message, 'BadArguments');
          throw err;
        }
      };
      if (call.replay && !call.staged) {
        // A moved workspace catching up: the tool's files made again on this host; its recorded result
        // stands, and nothing is recorded, billed or leased. The call a lost host may or may not have
        // finished: when nothing is recorded it is made as usual.
        const recorded = (await deps.effects.find<ToolResult>(call.key)) ?? (call.reuse_key ? await deps.effects.find<ToolResult>(call.reuse_key) : undefined);
        if (recorded) {
          await runIn(deps.workspaceRoot);
          return { ...recorded.result, duplicate: true };
        }
      }
      const lease = deps.gpuLeases;
      return once(
        call.key,
        `tool:${call.tool}`,
        call.reuse_key,
        async (attempt) => {
          const info = Context.current().info;
          const resumedFrom = await pace(deps.pace);
          // A staged call (a run on a workspace host) runs on a copy of the workspace and returns what it wrote.
          const staged = call.staged ? await runStaged(deps.payloads.store, call.staged, call.org, call.run_id, runIn) : undefined;
          const raw = staged ? staged.result : await runIn(deps.workspaceRoot);
          const written = staged ? await packWrites(deps.payloads.store, call.org, call.run_id, call.key, staged.writes, deps.payloads.inlineMaxBytes) : {};
          const output = await inlineOrStore(deps.payloads.store, call, raw, deps.payloads.inlineMaxBytes);
          return {
            key: call.key,
            tool: call.tool,
            output: output.text,
            ...(output.ref ? { output_ref: output.ref } : {}),
            attempt,
            lane: info.taskQueue,
            duplicate: false,
            ...(resumedFrom ? { resumed_from_tick: resumedFrom } : {}),
            ...written,
          };
        },
        lease && { acquire: () => lease.acquire(call.key, call.org, call.run_id, WORKER), release: () => lease.release(call.key) },
      );
    },

    /** One bill per key. 429 and 5xx are retried by the workflow's policy; other 4xx never are. */
    async callModel(call: ModelCall): Promise<ModelReply> {
      const chat = call.model && deps.chatFor ? deps.chatFor(call.model) : (deps.chat ?? notServed('the model'));
      const maxTokens = deps.maxTokens ?? DEFAULT_MODEL_MAX_TOKENS;
      const prices = deps.prices ?? {};
      const limit = deps.rateLimits && rateLimitOf(deps.rateLimits.limits, chat.model);
      const reply = await once(call.key, 'model', call.reuse_key, async (attempt) => {
        const worst = deps.budgets || limit ? worstCaseOf(call.messages, chat.model, prices, maxTokens) : undefined;
        // First its turn under the model's shared limits: when there is no room yet, the workflow waits on a
        // timer and calls again, holding nothing meanwhile (no slot, no reservation).
        const turn = limit && deps.rateLimits && worst ? { bucket: `${deps.rateLimits.endpoint} ${chat.model}`, share: `${call.org}/${call.tier ?? 'batch'}` } : undefined;
        const giveBack = async (tokens: number) => {
          if (turn && deps.rateLimits) await deps.rateLimits.limiter.refund(turn.bucket, turn.share, tokens, limit);
        };
        if (turn && deps.rateLimits && limit && worst) {
          const decision = await deps.rateLimits.limiter.acquire({ ...turn, weight: deps.rateLimits.weights[call.tier ?? 'batch'] ?? 1, tokens: worst.tokens, limit });
          if (!decision.ok) {
            rateLimitWaits?.inc({ model: chat.model });
            throw ApplicationFailure.create({
              message: `no room under ${chat.model}'s shared rate limits yet: waiting ${decision.wait_ms} ms for a turn`,
              type: RATE_LIMIT_WAIT,
              nonRetryable: true,
              // The attempt it got to, so the call made after the wait numbers its reply's deltas after this one's.
              details: [{ wait_ms: decision.wait_ms, attempt }],
            });
          }
        }
        // Then the worst case is reserved, keyed by the call: a retry finds its reservation, never makes a second.
        // It counts against the run whose budget limits it (an eval's agent case: its eval's).
        if (deps.budgets && worst) {
          const reserved = await deps.budgets.reserve({ key: call.key, org: call.org, run_id: call.budget_run_id ?? call.run_id, ...worst }, call.budget ?? {});
          if (!reserved.ok) {
            // The turn was not used: its tokens go back to the share.
            await giveBack(worst.tokens);
            throw ApplicationFailure.create({ message: budgetMessage(reserved.shortfall), type: BUDGET_EXHAUSTED, nonRetryable: true, details: [reserved.shortfall] });
          }
        }
        // The reply as it is written, for live readers: numbered by attempt (counting the attempts before a
        // rate-limit wait), so a retry's deltas replace the last one's; a research child's under its parent's step.
        const streamAttempt = (call.attempts_before ?? 0) + attempt;
        const tokens = deps.tokens && new TokenStream(deps.tokens.sink, { org: call.org, run_id: call.run_id, step: call.step ?? stepOfKey(call.key) ?? 0, attempt: streamAttempt }, deps.tokens.onError);
        let reply;
        try {
          reply = await chat.complete(
            { messages: call.messages as ChatMessage[], max_tokens: maxTokens, ...(call.tools.length ? { tools: toolSpecsFor(call.tools) } : {}) },
            Context.current().cancellationSignal,
            tokens && { onDelta: (delta) => tokens.push(delta) },
          );
        } catch (err) {
          if (!(err instanceof ChatError)) throw err;
          // The provider's own limit was hit: every worker's rate for this model is lowered for a while.
          if (err.kind === 'rate_limited' && turn && deps.rateLimits) await deps.rateLimits.limiter.shrink(turn.bucket);
          // A failed request used no tokens: the turn's go back (the request itself stays counted).
          if (worst) await giveBack(worst.tokens);
          if (!err.retryable) {
            // A call that will not be made again frees what it reserved; a retried one keeps it.
            await deps.budgets?.release(call.key);
            throw ApplicationFailure.nonRetryable(`the model refused the request: ${err.message}`, 'BadArguments');
          }
          throw ApplicationFailure.create({
            message: `model call failed (${err.kind}): ${err.message}`,
            type: `Model_${err.kind}`,
            ...(err.retryAfterMs !== undefined ? { nextRetryDelay: err.retryAfterMs } : {}),
          });
        } finally {
          // Every delta sent before the call's result is recorded (and its step's event published).
          await tokens?.close();
        }
        const usage = usageOf(call, reply, chat.model, prices);
        const used = usage.prompt_tokens + usage.completion_tokens;
        await both(
          deps.budgets ? deps.budgets.settle(call.key, used, usage.cost_usd) : Promise.resolve(),
          // What the turn took beyond what the call used goes back to the share.
          worst ? giveBack(worst.tokens - used) : undefined,
        );
        const content = await inlineOrStore(deps.payloads.store, call, reply.content ?? '', deps.payloads.inlineMaxBytes);
        return {
          key: call.key,
          usage,
          content: content.text,
          ...(content.ref ? { content_ref: content.ref } : {}),
          tool_calls: reply.tool_calls.map((t) => ({ id: t.id, name: t.name, arguments: t.raw_arguments })),
          finish_reason: reply.finish_reason ?? 'stop',
          attempt,
          duplicate: false,
        };
      });
      // A completion lost after its effect was recorded (the fault suite's way to make one): the retry
      // finds the recorded reply, and reserves, settles and bills nothing again.
      if (!reply.duplicate && deps.faults?.hit('model.lose_completion_every')) {
        throw ApplicationFailure.retryable(`fault point model.lose_completion_every: the completion of ${call.key} is lost`, 'FaultLostCompletion');
      }
      return reply;
    },

    async stageWorkspace({ org, run_id, key }) {
      return stageWorkspace(deps.payloads.store, deps.workspaceRoot, org, run_id, key);
    },

    async applyWrites({ org, run_id, writes, writes_ref }) {
      return applyWrites(deps.payloads.store, deps.workspaceRoot, org, run_id, { ...(writes ? { writes } : {}), ...(writes_ref ? { writes_ref } : {}) });
    },

    async restoreSnapshot(input) {
      const restored = await (restore ?? notServed('snapshot restore'))(input);
      return deps.placement ? { ...restored, placement: deps.placement } : restored;
    },

    async compensate({ name }) {
      const leases = deps.compensations ?? notServed('compensation');
      const [action, ...rest] = name.split(':');
      if (action !== 'release_gpu' || rest.length === 0) throw ApplicationFailure.nonRetryable(`unknown compensation '${name}'`, 'BadArguments');
      const key = rest.join(':');
      return (await leases.release(key)) ? `released the GPU held by ${key}` : `no GPU was held by ${key}`;
    },
  };
}

/** A refusal in words: whose limit, what is spent and held, and what the call needed. */
export function budgetMessage(s: BudgetShortfall): string {
  const unit = (n: number) => (s.limit === 'usd' ? `$${n}` : `${n} tokens`);
  const whose = s.scope === 'run' ? "the run's" : "the org's monthly";
  return `budget exhausted: ${whose} ${s.limit === 'usd' ? 'cost' : 'token'} limit is ${unit(s.max)}, ${unit(s.spent)} spent and ${unit(s.reserved)} reserved (${unit(s.left)} left); this model call needs up to ${unit(s.needed)}`;
}
