import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { restoreArchive, type ObjectStore } from '@agentrun/archive';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { snapshotObjectKeys, type CaseErrorType, type CaseResult, type CaseScore } from '@agentrun/contracts';
import {
  caseScore,
  caseText,
  datasetObjectKey,
  loadSuite,
  parseDatasetText,
  scoreCase,
  ScorerOptionError,
  UnreadableJudgeError,
  UnreadableOutputError,
  type ChatTurn,
  type EvalCase,
  type Judge,
  type ScorerSpec,
  type WorkspaceReader,
} from '@agentrun/evals';
import type { AgentCaseRun, CaseOutcome, CaseRequest, CaseSpec, EvalDatasetRef, NamedSpec } from '@agentrun/workflows';
import { ChatError, classifyModelError, type ChatClient, type ChatMessage, type ChatUsage } from './llm';
import { costOf, priceOf, type ModelPrices } from '@agentrun/config';
import type { BudgetLedger } from '@agentrun/persistence';
import { estimateTokens } from './usage';

import { streamText } from './snapshot.activities';

/** A case of a dataset, by the dataset's reference. */
export interface EvalCaseSource {
  load(org: string, dataset: EvalDatasetRef, caseId: string): Promise<EvalCase>;
}

/** Reads shipped suites from the evals library and stored datasets from the object store, keeping the last few parsed. */
export function createCaseSource(store: ObjectStore, keep = 8): EvalCaseSource {
  const cache = new Map<string, Promise<Map<string, EvalCase>>>();
  const casesOf = (org: string, dataset: EvalDatasetRef): Promise<Map<string, EvalCase>> => {
    const key = `${dataset.source}:${org}:${dataset.id}:${dataset.name}`;
    let cases = cache.get(key);
    if (!cases) {
      cases = (async () => {
        const list = dataset.source === 'shipped' ? loadSuite(dataset.name).cases : parseDatasetText(await streamText(await store.get(datasetObjectKey(org, dataset.id))));
        return new Map(list.map((c) => [c.id, c]));
      })();
      // A failed read is not kept: the next attempt reads again.
      cases.catch(() => cache.delete(key));
      cache.set(key, cases);
      if (cache.size > keep) cache.delete(cache.keys().next().value as string);
    }
    return cases;
  };
  return {
    async load(org, dataset, caseId) {
      const found = (await casesOf(org, dataset)).get(caseId);
      if (!found) throw ApplicationFailure.nonRetryable(`dataset '${dataset.name}' (${dataset.id}) has no case '${caseId}'`, 'BadArguments');
      return found;
    },
  };
}

/** A chat client for an endpoint and model; the worker owns the URLs and the keys. */
export type ChatClientFor = (endpoint: string | undefined, model: string) => ChatClient;

export interface RealCaseDeps {
  cases: EvalCaseSource;
  chatFor: ChatClientFor;
  /** Default answer length for `generate` when the solver does not say. */
  maxTokens: number;
  /** What the cases' model calls cost (AGENTRUN_MODEL_PRICES); without it a case's usage has no cost. */
  prices?: ModelPrices;
  /** The reservation ledger: a case's worst case is reserved against the eval's budget and its org's month before it runs. */
  budgets?: Pick<BudgetLedger, 'reserve' | 'settle' | 'release'>;
}

/** Texts in an event are cut to what its schema allows. */
const clip = (text: string, max: number): [string, boolean] => (text.length > max ? [text.slice(0, max), true] : [text, false]);

/** What a case's model calls took: tokens, and their cost at the configured prices when there are any. */
interface CaseUsage {
  prompt_tokens: number;
  completion_tokens: number;
  cost_usd?: number;
}

/** What a case's solver produced: its answer and the tokens it took. */
interface Solved {
  output: string;
  usage?: CaseUsage;
}

/** Adds one call's tokens (priced as `model`) to a case's. */
function addCall(total: CaseUsage | undefined, usage: ChatUsage | null, model: string, prices: ModelPrices | undefined): CaseUsage | undefined {
  if (!usage) return total;
  const price = prices && priceOf(prices, model);
  const cost = price ? costOf(price, usage.prompt_tokens, usage.completion_tokens) : undefined;
  const before = total?.cost_usd;
  return {
    prompt_tokens: (total?.prompt_tokens ?? 0) + usage.prompt_tokens,
    completion_tokens: (total?.completion_tokens ?? 0) + usage.completion_tokens,
    ...(cost !== undefined || before !== undefined ? { cost_usd: Math.round(((before ?? 0) + (cost ?? 0)) * 1e8) / 1e8 } : {}),
  };
}

/** Keeps the activity alive while a model answers: a cancel is seen at the next beat. */
async function withHeartbeat<T>(work: () => Promise<T>): Promise<T> {
  const ctx = Context.current();
  const every = Math.max(200, Math.min(5_000, (ctx.info.heartbeatTimeoutMs ?? 10_000) / 3));
  const timer = setInterval(() => ctx.heartbeat({ waiting: 'model' }), every);
  try {
    ctx.heartbeat({ waiting: 'model' });
    return await work();
  } finally {
    clearInterval(timer);
  }
}

function messagesFor(input: EvalCase['input'], systemPrompt: string | undefined): ChatMessage[] {
  const turns: ChatTurn[] = typeof input === 'string' ? [{ role: 'user', content: input }] : input;
  return [...(systemPrompt ? [{ role: 'system' as const, content: systemPrompt }] : []), ...turns.map((t) => ({ role: t.role, content: t.content }) as ChatMessage)];
}

/** `generate`: one model call with the case's input. */
async function generate(deps: RealCaseDeps, spec: CaseSpec, evalCase: EvalCase): Promise<Solved> {
  const solver = spec.solver as NamedSpec & { system_prompt?: string; temperature?: number; max_tokens?: number };
  const client = deps.chatFor(spec.model_endpoint, spec.model);
  const reply = await withHeartbeat(() =>
    client.complete(
      {
        messages: messagesFor(evalCase.input, solver.system_prompt),
        max_tokens: solver.max_tokens ?? deps.maxTokens,
        ...(solver.temperature !== undefined ? { temperature: solver.temperature } : {}),
      },
      Context.current().cancellationSignal,
    ),
  );
  const usage = addCall(undefined, reply.usage, spec.model, deps.prices);
  return { output: reply.content ?? '', ...(usage ? { usage } : {}) };
}

/** The judge for `model_graded`: the scorer's own model and endpoint, else the run's. */
function judgeFor(deps: RealCaseDeps, spec: CaseSpec, scorers: ScorerSpec[], spent: (usage: ChatUsage | null, model: string) => void): Judge | undefined {
  const graded = scorers.find((s) => s.name === 'model_graded') as (ScorerSpec & { model?: string; endpoint?: string }) | undefined;
  if (!graded) return undefined;
  const model = graded.model ?? spec.model;
  const client = deps.chatFor(graded.endpoint ?? spec.model_endpoint, model);
  return async (messages) => {
    // Its verdict is bounded, so the case's worst case (`caseWorstCase`) holds.
    const reply = await withHeartbeat(() => client.complete({ messages: messages.map((m) => ({ role: m.role, content: m.content }) as ChatMessage), temperature: 0, max_tokens: JUDGE_OVERHEAD_TOKENS }, Context.current().cancellationSignal));
    // The judge's tokens are the case's too.
    spent(reply.usage, model);
    return reply.content ?? '';
  };
}

/** What a judge's call may take beyond the graded texts: its instructions and its verdict. */
const JUDGE_OVERHEAD_TOKENS = 512;

/**
 * The most a `generate` case's model calls may take: its prompt (estimated) and its `max_tokens`, and
 * with a `model_graded` scorer the judge's call too (the case's texts and answer, and its overhead),
 * each at its model's price.
 */
export function caseWorstCase(spec: CaseSpec, evalCase: EvalCase, maxTokens: number, prices: ModelPrices | undefined): { tokens: number; usd: number } {
  const solver = spec.solver as NamedSpec & { system_prompt?: string; max_tokens?: number };
  const answer = solver.max_tokens ?? maxTokens;
  const prompt = estimateTokens(caseText(evalCase.input) + (solver.system_prompt ?? ''));
  const priced = (model: string, p: number, c: number) => {
    const price = prices && priceOf(prices, model);
    return price ? costOf(price, p, c) : 0;
  };
  let tokens = prompt + answer;
  let usd = priced(spec.model, prompt, answer);
  const graded = (spec.scorers as ScorerSpec[]).find((s) => s.name === 'model_graded') as (ScorerSpec & { model?: string }) | undefined;
  if (graded) {
    const targets = (Array.isArray(evalCase.target) ? evalCase.target : [evalCase.target]).join('\n');
    const judgePrompt = prompt + estimateTokens(targets) + answer + JUDGE_OVERHEAD_TOKENS;
    tokens += judgePrompt + JUDGE_OVERHEAD_TOKENS;
    usd += priced(graded.model ?? spec.model, judgePrompt, JUDGE_OVERHEAD_TOKENS);
  }
  return { tokens, usd: Math.round(usd * 1e8) / 1e8 };
}

/** A case that ended without a score: the error type says whose fault it was. */
export class CaseError extends Error {
  constructor(
    readonly errorType: CaseErrorType,
    message: string,
    /** Worth another attempt (a 5xx, a timeout, a plain 429) unless this was the last one. */
    readonly transient = false,
    readonly retryAfterMs?: number,
  ) {
    super(message);
    this.name = 'CaseError';
  }
}

/** What went wrong, as the platform classifies it: only what really happened decides. */
export function caseErrorOf(err: unknown): CaseError | undefined {
  if (err instanceof CaseError) return err;
  if (err instanceof UnreadableOutputError) return new CaseError('agent_error', err.message);
  // The judge answered without a grade: not the agent's doing, and asking again at temperature 0 says the same.
  if (err instanceof UnreadableJudgeError) return new CaseError('infra_error', err.message);
  // A scorer that cannot apply to this case (an empty target for 'exact', a target that is not a number).
  if (err instanceof ScorerOptionError) return new CaseError('agent_error', `the scorers cannot score this case: ${err.message}`);
  if (err instanceof ChatError) {
    const type = classifyModelError(err);
    if (type === 'infra_error') return new CaseError('infra_error', err.message, true, err.retryAfterMs);
    if (type) return new CaseError(type, err.message);
    // A request the model refuses (an unknown model, a bad option) is the eval's mistake: it will not change on retry.
    return new CaseError('agent_error', `the model refused the request: ${err.message}`);
  }
  return undefined;
}

/** What a solver hands the scorers: its answer, what it cost, and (agents) its final workspace. */
interface Solution extends Solved {
  workspace?: WorkspaceReader;
}

/**
 * One case of a real eval: load it, solve it, score it. Returns the outcome for the ledger (an error type on
 * it when the case ended with one), or throws: a transient failure while attempts remain, so the policy
 * retries it; anything unclassified (a bug, a lost store) fails the activity.
 */
async function solveAndScore(deps: RealCaseDeps, request: CaseRequest & { spec: CaseSpec }, solve: (evalCase: EvalCase) => Promise<Solution>, startedAt = Date.now()): Promise<CaseOutcome> {
  const { spec } = request;
  const { attempt } = Context.current().info;
  const evalCase = await deps.cases.load(request.org, spec.dataset, request.case_id);
  const scorers = spec.scorers as ScorerSpec[];
  const [input, inputCut] = clip(caseText(evalCase.input), 4_000);
  const target = (Array.isArray(evalCase.target) ? evalCase.target : [evalCase.target]).map((t) => t.slice(0, 1_000));
  let solved: Solution | undefined;
  let scores: CaseScore[] = [];
  let failure: CaseError | undefined;
  let judged: CaseUsage | undefined;
  try {
    solved = await solve(evalCase);
    const subject = { input: evalCase.input, target: evalCase.target, output: solved.output, ...(evalCase.metadata ? { metadata: evalCase.metadata } : {}), ...(solved.workspace ? { workspace: solved.workspace } : {}) };
    const judge = judgeFor(deps, spec, scorers, (usage, model) => {
      judged = addCall(judged, usage, model, deps.prices);
    });
    scores = (await scoreCase(scorers, subject, judge)).map((s) => ({ ...s, explanation: s.explanation.slice(0, 2_000) }));
  } catch (err) {
    failure = caseErrorOf(err);
    if (!failure) throw err;
    // A transient failure is retried by the policy while attempts remain; the last one is the case's result.
    if (failure.transient && attempt < (request.max_attempts ?? 1)) {
      throw ApplicationFailure.create({
        message: `case ${request.case_id}: ${failure.message} (attempt ${attempt})`,
        type: 'CaseTransient',
        ...(failure.retryAfterMs !== undefined ? { nextRetryDelay: failure.retryAfterMs } : {}),
      });
    }
  }
  const [output, outputCut] = solved ? clip(solved.output, 8_000) : [null, false];
  const result: CaseResult = {
    input,
    target,
    output,
    scores,
    ...(solved?.usage || judged ? { usage: sumUsage(solved?.usage, judged) } : {}),
    duration_ms: Math.max(0, Date.now() - startedAt),
    ...(failure ? { error: failure.message.slice(0, 2_000) } : {}),
    ...(inputCut || outputCut ? { truncated: true } : {}),
  };
  const ok = failure === undefined;
  return { key: request.key, case_id: request.case_id, ok, score: ok ? caseScore(scores) : 0, attempt, duplicate: false, ...(failure ? { error_type: failure.errorType } : {}), result };
}

/** The solver's and the judge's tokens and cost together. */
function sumUsage(a: CaseUsage | undefined, b: CaseUsage | undefined): CaseUsage {
  const cost = a?.cost_usd !== undefined || b?.cost_usd !== undefined ? { cost_usd: Math.round(((a?.cost_usd ?? 0) + (b?.cost_usd ?? 0)) * 1e8) / 1e8 } : {};
  return { prompt_tokens: (a?.prompt_tokens ?? 0) + (b?.prompt_tokens ?? 0), completion_tokens: (a?.completion_tokens ?? 0) + (b?.completion_tokens ?? 0), ...cost };
}

/** `generate` (the one solver that runs on the eval lane itself): one model call with the case's input. */
export function runGenerateCase(deps: RealCaseDeps, request: CaseRequest & { spec: CaseSpec }): Promise<CaseOutcome> {
  const { spec } = request;
  return solveAndScore(deps, request, (evalCase) => {
    if (spec.solver.name !== 'generate') throw new CaseError('agent_error', `the '${spec.solver.name}' solver does not run on the eval lane`);
    return generate(deps, spec, evalCase);
  });
}

/** An agent case's goal: its input as one text. */
export async function agentCaseGoal(deps: RealCaseDeps, request: CaseRequest & { spec: CaseSpec }): Promise<{ goal: string }> {
  const evalCase = await deps.cases.load(request.org, request.spec.dataset, request.case_id);
  return { goal: caseText(evalCase.input) };
}

/** The most an agent case's final workspace may hold when it is unpacked for scoring. */
const SCORED_WORKSPACE_MAX_BYTES = 256 * 1024 * 1024;

/**
 * Scores an agent case from its run: the answer it gave and its final workspace, read from the final
 * snapshot's archive (so it does not matter which host the run's workspace was on).
 */
export async function scoreAgentCaseRun(deps: RealCaseDeps, store: ObjectStore, request: CaseRequest & { spec: CaseSpec; run: AgentCaseRun }): Promise<CaseOutcome> {
  const { run } = request;
  const scratch = await mkdtemp(join(tmpdir(), 'agentrun-case-'));
  try {
    return await solveAndScore(
      deps,
      request,
      async () => {
        if (run.status !== 'done') throw new CaseError('agent_error', `the agent run '${run.child_run_id}' ended ${run.status ?? 'without a status'}${run.error ? `: ${run.error}` : ''}`);
        let workspace: WorkspaceReader | undefined;
        if (run.final_snapshot_id) {
          const archive = await store.get(snapshotObjectKeys(request.org, run.child_run_id, run.final_snapshot_id).archive);
          await restoreArchive(archive, scratch, { maxBytes: SCORED_WORKSPACE_MAX_BYTES });
          workspace = {
            async read(path) {
              const full = resolve(scratch, path);
              if (!full.startsWith(`${scratch}/`)) return undefined;
              return readFile(full, 'utf8').catch(() => undefined);
            },
          };
        } else if ((request.spec.scorers as ScorerSpec[]).some((s) => s.name === 'files')) {
          throw new CaseError('agent_error', `the agent run '${run.child_run_id}' left no final snapshot to check its files in`);
        }
        return { output: run.answer ?? '', ...(workspace ? { workspace } : {}) };
      },
      Date.now() - (run.duration_ms ?? 0),
    );
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}
