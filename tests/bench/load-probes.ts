/**
 * What the load bench samples while a step runs, to find where a queue forms, and what it reads from
 * the runs' histories afterwards:
 *
 *   - the services' /metrics: command and projector consumer lag (agentrun_kafka_consumer_lag), the
 *     Temporal SDK's slot use per worker and task queue (temporal_worker_task_slots_used), and its
 *     workflow-task and activity schedule-to-start histograms (mean over the step, from their deltas);
 *   - CPU per process from /proc: each app of the platform (the bench's child processes), the stack's
 *     Temporal server, Postgres (postmaster and backends) and Kafka, the bench process, the machine;
 *   - Postgres: active and lock-waiting backends on the platform's database, commits/s;
 *   - from histories: per run publish -> workflow started -> closed -> terminal, and each workflow
 *     task's and activity's schedule-to-start and run time.
 */
import { existsSync, readdirSync, readFileSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Client } from '@temporalio/client';
import { addCounts, countHistory, eventTimeMs, eventTypeName, fetchRunHistories, type HistoryCounts, type HistoryEvent } from '../support/history-counts';
import { REPO_ROOT, stackEnv } from '../support/stack-env';
import { parse, type Sample } from '../support/prometheus';

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

export const mean = (values: number[]) => (values.length ? values.reduce((s, v) => s + v, 0) / values.length : NaN);

// ---------------------------------------------------------------- Prometheus text

export type MetricSample = Sample;

async function scrape(port: number): Promise<MetricSample[]> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(2_000) });
    return parse(await res.text(), { lenient: true });
  } catch {
    return [];
  }
}

// ---------------------------------------------------------------- /proc

const TICKS_PER_S = 100; // USER_HZ on Linux

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/** utime + stime of a process, and its parent, from /proc/<pid>/stat. */
function procStat(pid: number): { ticks: number; ppid: number } | undefined {
  const text = readText(`/proc/${pid}/stat`);
  if (!text) return undefined;
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // rest[0] is field 3 (state): ppid is field 4, utime 14, stime 15.
  return { ppid: Number(rest[1]), ticks: Number(rest[11]) + Number(rest[12]) };
}

function cmdlineOf(pid: number): string {
  return (readText(`/proc/${pid}/cmdline`) ?? '').split('\0').join(' ');
}

function allPids(): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .map(Number);
}

function childrenOf(pid: number): number[] {
  return allPids().filter((p) => procStat(p)?.ppid === pid);
}

/** Busy and total jiffies of the whole machine (/proc/stat's cpu line). */
function machineTicks(): { busy: number; total: number } {
  const line = (readText('/proc/stat') ?? '').split('\n')[0];
  const v = line.split(/\s+/).slice(1).map(Number);
  const idle = (v[3] ?? 0) + (v[4] ?? 0);
  const total = v.slice(0, 8).reduce((s, x) => s + (x || 0), 0);
  return { busy: total - idle, total };
}

function pidFromFile(path: string): number | undefined {
  const text = readText(path);
  const pid = text ? Number(text.split('\n')[0].trim()) : NaN;
  return Number.isInteger(pid) && pid > 0 && existsSync(`/proc/${pid}`) ? pid : undefined;
}

/** The shared stack's server processes: from its pid files (under the .stack the worktree's opt/ points into), else by command line. */
export function stackPids(): { temporal?: number; postgres?: number; kafka?: number } {
  const dirs = [join(REPO_ROOT, '.stack')];
  try {
    dirs.push(dirname(realpathSync(join(REPO_ROOT, '.stack', 'opt'))));
  } catch {
    // no opt/ link: only this worktree's .stack
  }
  const fromFiles = (svc: string) => dirs.map((d) => pidFromFile(join(d, 'logs', `${svc}.pid`))).find((p) => p !== undefined);
  const port = stackEnv().TEMPORAL_PORT;
  const byCmd = (test: (cmd: string) => boolean) => allPids().find((p) => test(cmdlineOf(p)));
  return {
    temporal: fromFiles('temporal') ?? byCmd((c) => c.includes('start-dev') && c.includes(`--port ${port}`)),
    postgres: fromFiles('postgres') ?? dirs.map((d) => pidFromFile(join(d, 'data', 'postgres', 'postmaster.pid'))).find((p) => p !== undefined),
    kafka: fromFiles('kafka') ?? byCmd((c) => c.includes('kafka.Kafka')),
  };
}

/** Named groups of processes whose CPU is read together; `pids` is called at each reading (Postgres backends come and go). */
interface CpuGroup {
  name: string;
  pids: () => number[];
}

/** The groups the load bench watches: every app of the platform, the stack's servers, the bench itself. */
export function cpuGroups(): CpuGroup[] {
  const stack = stackPids();
  const apps = (): Map<string, number[]> => {
    const byApp = new Map<string, number[]>();
    for (const pid of childrenOf(process.pid)) {
      const m = /apps\/([a-z-]+)\/dist\/main\.js/.exec(cmdlineOf(pid));
      if (m) byApp.set(m[1], [...(byApp.get(m[1]) ?? []), pid]);
    }
    return byApp;
  };
  const appGroup = (name: string): CpuGroup => ({ name, pids: () => apps().get(name) ?? [] });
  return [
    { name: 'temporal', pids: () => (stack.temporal ? [stack.temporal] : []) },
    { name: 'postgres', pids: () => (stack.postgres ? [stack.postgres, ...childrenOf(stack.postgres)] : []) },
    { name: 'kafka', pids: () => (stack.kafka ? [stack.kafka] : []) },
    appGroup('orchestrator'),
    appGroup('gpu-worker'),
    appGroup('projector'),
    appGroup('gateway'),
    appGroup('snapshotter'),
    { name: 'bench', pids: () => [process.pid] },
  ];
}

/** Ticks per pid now (a pid that is gone counts as its last reading, so a backend's exit loses little). */
function readTicks(groups: CpuGroup[]): Map<string, Map<number, number>> {
  const out = new Map<string, Map<number, number>>();
  for (const g of groups) {
    const byPid = new Map<number, number>();
    for (const pid of g.pids()) {
      const s = procStat(pid);
      if (s) byPid.set(pid, s.ticks);
    }
    out.set(g.name, byPid);
  }
  return out;
}

// ---------------------------------------------------------------- the sampler

export interface StepProbes {
  seconds: number;
  /** CPU in cores (1.0 = one core busy), mean over the step, per group; `machine` is every process. */
  cpu: Record<string, number>;
  commandLag: { max: number; mean: number };
  projectorLag: { max: number; mean: number };
  /** Max and mean of temporal_worker_task_slots_used per `app worker_type queue`. */
  slots: Record<string, { max: number; mean: number; available?: number }>;
  /** Mean schedule-to-start over the step from the SDK histograms' deltas, ms, per app. */
  wftScheduleToStartMs: Record<string, number>;
  activityScheduleToStartMs: Record<string, number>;
  pg: { activeMax: number; activeMean: number; lockWaitMax: number; commitsPerS: number };
}

type Query = <T>(sql: string, params?: unknown[]) => Promise<T[]>;

/**
 * Samples every `everyMs` from start() to stop(): the services' metrics (ports by app name), CPU of the
 * groups, and Postgres (`query` on the platform's database, `database` its name).
 */
export class Sampler {
  private timer?: NodeJS.Timeout;
  private readonly groups = cpuGroups();
  private t0 = 0;
  private ticks0 = new Map<string, Map<number, number>>();
  private machine0 = machineTicks();
  private commits0 = 0;
  private hist0 = new Map<string, MetricSample[]>();
  private readonly lags: { command: number[]; projector: number[] } = { command: [], projector: [] };
  private readonly slotReadings = new Map<string, { used: number[]; available?: number }>();
  private readonly pgActive: number[] = [];
  private readonly pgWaits: number[] = [];
  private busy = false;

  constructor(
    private readonly ports: Record<string, number>,
    private readonly query: Query,
    private readonly database: string,
    private readonly everyMs = 1_000,
  ) {}

  private async commits(): Promise<number> {
    const rows = await this.query<{ n: string }>('SELECT xact_commit AS n FROM pg_stat_database WHERE datname = $1', [this.database]);
    return Number(rows[0]?.n ?? 0);
  }

  private async scrapeAll(): Promise<Map<string, MetricSample[]>> {
    const out = new Map<string, MetricSample[]>();
    await Promise.all(Object.entries(this.ports).map(async ([app, port]) => out.set(app, await scrape(port))));
    return out;
  }

  async start(): Promise<void> {
    this.t0 = performance.now();
    this.ticks0 = readTicks(this.groups);
    this.machine0 = machineTicks();
    this.commits0 = await this.commits();
    this.hist0 = await this.scrapeAll();
    this.timer = setInterval(() => void this.sample(), this.everyMs);
  }

  private async sample(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      const metrics = await this.scrapeAll();
      for (const [app, samples] of metrics) {
        const lag = (part: string) => samples.filter((s) => s.name === 'agentrun_kafka_consumer_lag' && (s.labels.group ?? '').includes(part)).reduce((sum, s) => sum + s.value, 0);
        if (app === 'orchestrator') this.lags.command.push(lag('commands'));
        if (app === 'projector') this.lags.projector.push(lag('projector'));
        for (const s of samples) {
          if (s.name !== 'temporal_worker_task_slots_used' && s.name !== 'temporal_worker_task_slots_available') continue;
          const key = `${app} ${s.labels.worker_type ?? '?'} ${(s.labels.task_queue ?? '?').replace(/^t[0-9a-f]{8}\./, '')}`;
          const entry = this.slotReadings.get(key) ?? { used: [] };
          if (s.name === 'temporal_worker_task_slots_used') entry.used.push(s.value);
          else entry.available = s.value;
          this.slotReadings.set(key, entry);
        }
      }
      const rows = await this.query<{ active: string; waiting: string }>(
        "SELECT count(*) FILTER (WHERE state = 'active') AS active, count(*) FILTER (WHERE wait_event_type = 'Lock') AS waiting FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
        [this.database],
      );
      this.pgActive.push(Number(rows[0]?.active ?? 0));
      this.pgWaits.push(Number(rows[0]?.waiting ?? 0));
    } catch {
      // a missed sample is a missed sample
    } finally {
      this.busy = false;
    }
  }

  async stop(): Promise<StepProbes> {
    clearInterval(this.timer);
    const seconds = (performance.now() - this.t0) / 1000;
    const ticks1 = readTicks(this.groups);
    const machine1 = machineTicks();
    const commits1 = await this.commits();
    const hist1 = await this.scrapeAll();
    const cpu: Record<string, number> = {};
    for (const g of this.groups) {
      const before = this.ticks0.get(g.name) ?? new Map();
      let delta = 0;
      for (const [pid, t] of ticks1.get(g.name) ?? new Map()) delta += t - (before.get(pid) ?? t);
      cpu[g.name] = delta / TICKS_PER_S / seconds;
    }
    cpu.machine = (machine1.busy - this.machine0.busy) / TICKS_PER_S / seconds;
    const meanOf = (name: RegExp): Record<string, number> => {
      const out: Record<string, number> = {};
      for (const [app, after] of hist1) {
        const total = (samples: MetricSample[] | undefined, suffix: string) =>
          (samples ?? []).filter((s) => name.test(s.name) && s.name.endsWith(suffix)).reduce((sum, s) => sum + s.value, 0);
        const count = total(after, '_count') - total(this.hist0.get(app), '_count');
        if (count > 0) out[app] = ((total(after, '_sum') - total(this.hist0.get(app), '_sum')) / count) * 1000;
      }
      return out;
    };
    const stat = (v: number[]) => ({ max: v.length ? Math.max(...v) : NaN, mean: mean(v) });
    const slots: StepProbes['slots'] = {};
    for (const [key, r] of this.slotReadings) slots[key] = { ...stat(r.used), available: r.available };
    return {
      seconds,
      cpu,
      commandLag: stat(this.lags.command),
      projectorLag: stat(this.lags.projector),
      slots,
      wftScheduleToStartMs: meanOf(/^temporal_workflow_task_schedule_to_start_latency/),
      activityScheduleToStartMs: meanOf(/^temporal_activity_schedule_to_start_latency/),
      pg: { activeMax: stat(this.pgActive).max, activeMean: stat(this.pgActive).mean, lockWaitMax: stat(this.pgWaits).max, commitsPerS: (commits1 - this.commits0) / seconds },
    };
  }
}

// ---------------------------------------------------------------- histories

/** One run's time line from its histories (ms since the epoch), and its tasks' waits and run times (ms). */
export interface RunTimeline {
  started: number;
  closed: number;
  /** Workflow tasks of the run and its children: schedule -> started, started -> completed. */
  wft: { wait: number[]; run: number[] };
  /** Activities by type: schedule -> started, started -> completed. */
  activities: Map<string, { wait: number[]; run: number[] }>;
  /** The activities the run made, in order, with their run times, children's inline where started (for the bare baseline's shape). */
  shape: ShapeStep[];
  /** Its histories counted: its executions and its children's. */
  counts: HistoryCounts;
}

export type ShapeStep = { kind: 'activity'; type: string; ms: number } | { kind: 'child'; activities: { type: string; ms: number }[] };
type ActivityStep = Extract<ShapeStep, { kind: 'activity' }>;
type ChildStep = Extract<ShapeStep, { kind: 'child' }>;

function tasksOf(events: HistoryEvent[], into: Pick<RunTimeline, 'wft' | 'activities'>): { type: string; ms: number; scheduledId: string }[] {
  const at = new Map<string, number>();
  const typeOf = new Map<string, string>();
  const ordered: { type: string; ms: number; scheduledId: string }[] = [];
  for (const e of events) {
    const id = String(e.eventId);
    const t = eventTimeMs(e);
    at.set(id, t);
    switch (eventTypeName(e.eventType)) {
      case 'WorkflowTaskStarted':
        into.wft.wait.push(t - (at.get(String(e.workflowTaskStartedEventAttributes?.scheduledEventId)) ?? t));
        break;
      case 'WorkflowTaskCompleted':
        into.wft.run.push(t - (at.get(String(e.workflowTaskCompletedEventAttributes?.startedEventId)) ?? t));
        break;
      case 'ActivityTaskScheduled':
        // Named with its lane (the task queue without the platform's prefix): runTool@cpu-tools, runTool@gpu-tools.
        typeOf.set(id, `${e.activityTaskScheduledEventAttributes?.activityType?.name ?? '?'}@${(e.activityTaskScheduledEventAttributes?.taskQueue?.name ?? '?').replace(/^t[0-9a-f]{8}\./, '')}`);
        break;
      case 'ActivityTaskCompleted': {
        const a = e.activityTaskCompletedEventAttributes;
        const scheduledId = String(a?.scheduledEventId);
        const started = at.get(String(a?.startedEventId)) ?? t;
        const type = typeOf.get(scheduledId) ?? '?';
        const entry = into.activities.get(type) ?? { wait: [], run: [] };
        entry.wait.push(started - (at.get(scheduledId) ?? started));
        entry.run.push(Math.max(0, t - started));
        into.activities.set(type, entry);
        ordered.push({ type, ms: Math.max(0, t - started), scheduledId });
        break;
      }
    }
  }
  // In the order they were scheduled.
  return ordered.sort((a, b) => Number(a.scheduledId) - Number(b.scheduledId));
}

/** Activity types that are the platform's bookkeeping, not the agent's work: left out of the bare baseline's shape. */
export const BOOKKEEPING_ACTIVITIES = new Set(['publishRunEvents']);
const bookkeeping = (type: string) => BOOKKEEPING_ACTIVITIES.has(type.split('@')[0]);

/** A run's time line: its executions and its children, fetched from Temporal. */
export async function runTimeline(client: Client, workflowId: string): Promise<RunTimeline> {
  const h = await fetchRunHistories(client, workflowId);
  const counts = addCounts(...h.executions.map((e) => countHistory(e.events)), ...h.children.map((c) => countHistory(c.events)));
  const tl: RunTimeline = { started: NaN, closed: NaN, wft: { wait: [], run: [] }, activities: new Map(), shape: [], counts };
  const childTasks = new Map<string, { type: string; ms: number }[]>();
  for (const c of h.children) childTasks.set(c.workflowId, tasksOf(c.events, tl).map(({ type, ms }) => ({ type, ms })));
  for (const [i, ex] of h.executions.entries()) {
    if (i === 0) tl.started = eventTimeMs(ex.events[0]);
    // Still running (its last events are out, its close is not): no close time.
    if (i === h.executions.length - 1 && ex.status !== 'RUNNING') tl.closed = eventTimeMs(ex.events[ex.events.length - 1]);
    const acts = tasksOf(ex.events, tl);
    // Merge activities and child starts in event order.
    const steps: { id: number; step: ShapeStep }[] = acts.filter((a) => !bookkeeping(a.type)).map((a) => ({ id: Number(a.scheduledId), step: { kind: 'activity' as const, type: a.type, ms: a.ms } }));
    for (const e of ex.events) {
      const child = e.startChildWorkflowExecutionInitiatedEventAttributes;
      if (child?.workflowId) steps.push({ id: Number(e.eventId), step: { kind: 'child' as const, activities: (childTasks.get(child.workflowId) ?? []).filter((a) => !bookkeeping(a.type)) } });
    }
    tl.shape.push(...steps.sort((a, b) => a.id - b.id).map((s) => s.step));
  }
  return tl;
}

/** The median shape of several runs of the same shape (the first's structure; each activity's median time). */
export function medianShape(shapes: ShapeStep[][]): ShapeStep[] {
  const [first] = shapes;
  if (!first) throw new Error('no run to take the shape from');
  const same = shapes.filter((s) => JSON.stringify(s.map(kindsOf)) === JSON.stringify(first.map(kindsOf)));
  return first.map((step, i) => {
    if (step.kind === 'activity') return { ...step, ms: Math.round(percentile(same.map((s) => (s[i] as ActivityStep).ms), 50)) };
    return { kind: 'child', activities: step.activities.map((a, j) => ({ ...a, ms: Math.round(percentile(same.map((s) => (s[i] as ChildStep).activities[j]?.ms ?? a.ms), 50)) })) };
  });
}

function kindsOf(s: ShapeStep): string {
  return s.kind === 'activity' ? s.type : `child(${s.activities.map((a) => a.type).join(',')})`;
}

export function describeShape(shape: ShapeStep[]): string {
  return shape.map((s) => (s.kind === 'activity' ? `${s.type} ${s.ms} ms` : `child[${s.activities.map((a) => `${a.type} ${a.ms} ms`).join(', ')}]`)).join(' -> ');
}

/** Up to `max` items spread evenly over the list (history fetches are not free). */
export function spread<T>(items: T[], max: number): T[] {
  if (items.length <= max) return items;
  return Array.from({ length: max }, (_, i) => items[Math.floor((i * items.length) / max)]);
}

/** Runs `fn` over items, `width` at a time. */
export async function pool<T, R>(items: T[], width: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]);
      }
    }),
  );
  return out;
}
