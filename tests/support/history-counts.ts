import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';

/**
 * What a workflow's histories hold, counted from the events themselves (no assumption about the
 * workflow's shape), and the Temporal Cloud billable actions they stand for, counted as
 * https://docs.temporal.io/cloud/actions counts them:
 *
 *   - an activity: one action per attempt started (a retry is another action);
 *   - local activities: one action per workflow task that recorded any (their `core_local_activity`
 *     markers), however many it recorded;
 *   - a search-attribute upsert: one action per `UpsertWorkflowSearchAttributes` (one or many keys),
 *     except one that only sets `TemporalChangeVersion`;
 *   - a workflow start (client start or continue-as-new): one; a child workflow: two in its parent
 *     (its start and its execution), so a child's own `WorkflowExecutionStarted` is not counted again;
 *   - a timer started, a signal received or sent, an update accepted: one each.
 *
 * Queries and activity heartbeats are actions too but leave no event: a history cannot show them.
 */
export type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

/** The marker the SDK core records for each local activity's result. */
export const LOCAL_ACTIVITY_MARKER = 'core_local_activity';
/** The version marker of `patched()`: not an action. */
export const PATCH_MARKER = 'core_patch';

export interface HistoryCounts {
  /** Histories counted (executions: a continue-as-new chain has one per execution, each child one). */
  histories: number;
  events: number;
  /** Events by type name without the EVENT_TYPE_ prefix, in PascalCase (`WorkflowTaskCompleted`). */
  byType: Record<string, number>;
  workflowTasks: { scheduled: number; completed: number; failed: number; timedOut: number; events: number };
  activities: { scheduled: number; attempts: number; events: number; byType: Record<string, number> };
  localActivities: { markers: number; workflowTasks: number };
  upserts: { events: number; billable: number };
  starts: { client: number; continueAsNew: number; child: number };
  children: { initiated: number; byType: Record<string, number> };
  timers: number;
  signals: { received: number; sent: number };
  updates: number;
}

/** The actions of some histories, each kind named. */
export interface BillableActions {
  activities: number;
  localActivities: number;
  upserts: number;
  workflowStarts: number;
  continueAsNew: number;
  childWorkflows: number;
  timers: number;
  signals: number;
  updates: number;
  /** Activities + local activities + upserts: what a step pays for (the per-step figure). */
  perStepKinds: number;
  total: number;
}

export function emptyCounts(): HistoryCounts {
  return {
    histories: 0,
    events: 0,
    byType: {},
    workflowTasks: { scheduled: 0, completed: 0, failed: 0, timedOut: 0, events: 0 },
    activities: { scheduled: 0, attempts: 0, events: 0, byType: {} },
    localActivities: { markers: 0, workflowTasks: 0 },
    upserts: { events: 0, billable: 0 },
    starts: { client: 0, continueAsNew: 0, child: 0 },
    children: { initiated: 0, byType: {} },
    timers: 0,
    signals: { received: 0, sent: 0 },
    updates: 0,
  };
}

/** `EVENT_TYPE_WORKFLOW_TASK_COMPLETED` (or its enum number) -> `WorkflowTaskCompleted`. */
export function eventTypeName(type: HistoryEvent['eventType']): string {
  const raw = typeof type === 'number' ? temporal.api.enums.v1.EventType[type] : String(type ?? 'EVENT_TYPE_UNSPECIFIED');
  return raw
    .replace(/^EVENT_TYPE_/, '')
    .toLowerCase()
    .replace(/(^|_)([a-z])/g, (_, __, c: string) => c.toUpperCase());
}

/** An event's time in ms since the epoch. */
export function eventTimeMs(event: HistoryEvent): number {
  const t = event.eventTime;
  if (!t) return NaN;
  return Number(t.seconds?.toString() ?? 0) * 1000 + Math.floor((t.nanos ?? 0) / 1e6);
}

const bump = (record: Record<string, number>, key: string, by = 1) => (record[key] = (record[key] ?? 0) + by);

/** Counts one history's events (one execution). */
export function countHistory(events: HistoryEvent[]): HistoryCounts {
  const c = emptyCounts();
  c.histories = 1;
  const activityType = new Map<string, string>();
  const laTasks = new Set<string>();
  for (const e of events) {
    const type = eventTypeName(e.eventType);
    c.events += 1;
    bump(c.byType, type);
    if (type.startsWith('WorkflowTask')) c.workflowTasks.events += 1;
    if (type.startsWith('ActivityTask')) c.activities.events += 1;
    switch (type) {
      case 'WorkflowTaskScheduled':
        c.workflowTasks.scheduled += 1;
        break;
      case 'WorkflowTaskCompleted':
        c.workflowTasks.completed += 1;
        break;
      case 'WorkflowTaskFailed':
        c.workflowTasks.failed += 1;
        break;
      case 'WorkflowTaskTimedOut':
        c.workflowTasks.timedOut += 1;
        break;
      case 'ActivityTaskScheduled': {
        const name = e.activityTaskScheduledEventAttributes?.activityType?.name ?? '?';
        activityType.set(String(e.eventId), name);
        c.activities.scheduled += 1;
        bump(c.activities.byType, name);
        break;
      }
      case 'ActivityTaskStarted':
        // Only the last attempt's start is recorded; its attempt number counts every try.
        c.activities.attempts += Math.max(1, e.activityTaskStartedEventAttributes?.attempt ?? 1);
        break;
      case 'MarkerRecorded': {
        const marker = e.markerRecordedEventAttributes;
        if (marker?.markerName === LOCAL_ACTIVITY_MARKER) {
          c.localActivities.markers += 1;
          laTasks.add(String(marker.workflowTaskCompletedEventId ?? e.eventId));
        }
        break;
      }
      case 'UpsertWorkflowSearchAttributes': {
        c.upserts.events += 1;
        const keys = Object.keys(e.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields ?? {});
        if (keys.length === 0 || keys.some((k) => k !== 'TemporalChangeVersion')) c.upserts.billable += 1;
        break;
      }
      case 'WorkflowExecutionStarted': {
        const started = e.workflowExecutionStartedEventAttributes;
        if (started?.parentWorkflowExecution?.workflowId) c.starts.child += 1;
        else if (started?.continuedExecutionRunId) c.starts.continueAsNew += 1;
        else c.starts.client += 1;
        break;
      }
      case 'StartChildWorkflowExecutionInitiated':
        c.children.initiated += 1;
        bump(c.children.byType, e.startChildWorkflowExecutionInitiatedEventAttributes?.workflowType?.name ?? '?');
        break;
      case 'TimerStarted':
        c.timers += 1;
        break;
      case 'WorkflowExecutionSignaled':
        c.signals.received += 1;
        break;
      case 'SignalExternalWorkflowExecutionInitiated':
        c.signals.sent += 1;
        break;
      case 'WorkflowExecutionUpdateAccepted':
        c.updates += 1;
        break;
    }
  }
  c.localActivities.workflowTasks = laTasks.size;
  return c;
}

function addRecord(a: Record<string, number>, b: Record<string, number>): Record<string, number> {
  const out = { ...a };
  for (const [k, v] of Object.entries(b)) bump(out, k, v);
  return out;
}

/** The sum of several histories' counts. */
export function addCounts(...all: HistoryCounts[]): HistoryCounts {
  return all.reduce(
    (a, b) => ({
      histories: a.histories + b.histories,
      events: a.events + b.events,
      byType: addRecord(a.byType, b.byType),
      workflowTasks: {
        scheduled: a.workflowTasks.scheduled + b.workflowTasks.scheduled,
        completed: a.workflowTasks.completed + b.workflowTasks.completed,
        failed: a.workflowTasks.failed + b.workflowTasks.failed,
        timedOut: a.workflowTasks.timedOut + b.workflowTasks.timedOut,
        events: a.workflowTasks.events + b.workflowTasks.events,
      },
      activities: {
        scheduled: a.activities.scheduled + b.activities.scheduled,
        attempts: a.activities.attempts + b.activities.attempts,
        events: a.activities.events + b.activities.events,
        byType: addRecord(a.activities.byType, b.activities.byType),
      },
      localActivities: { markers: a.localActivities.markers + b.localActivities.markers, workflowTasks: a.localActivities.workflowTasks + b.localActivities.workflowTasks },
      upserts: { events: a.upserts.events + b.upserts.events, billable: a.upserts.billable + b.upserts.billable },
      starts: { client: a.starts.client + b.starts.client, continueAsNew: a.starts.continueAsNew + b.starts.continueAsNew, child: a.starts.child + b.starts.child },
      children: { initiated: a.children.initiated + b.children.initiated, byType: addRecord(a.children.byType, b.children.byType) },
      timers: a.timers + b.timers,
      signals: { received: a.signals.received + b.signals.received, sent: a.signals.sent + b.signals.sent },
      updates: a.updates + b.updates,
    }),
    emptyCounts(),
  );
}

/** The Temporal Cloud actions the counted histories stand for. */
export function billableActions(c: HistoryCounts): BillableActions {
  const a = {
    activities: c.activities.attempts,
    localActivities: c.localActivities.workflowTasks,
    upserts: c.upserts.billable,
    workflowStarts: c.starts.client,
    continueAsNew: c.starts.continueAsNew,
    // Two per child in its parent's history (start + execution); the child's own start event is that.
    childWorkflows: 2 * c.children.initiated,
    timers: c.timers,
    signals: c.signals.received + c.signals.sent,
    updates: c.updates,
  };
  const perStepKinds = a.activities + a.localActivities + a.upserts;
  return { ...a, perStepKinds, total: perStepKinds + a.workflowStarts + a.continueAsNew + a.childWorkflows + a.timers + a.signals + a.updates };
}

export interface RunHistories {
  /** The run's own executions, first to last along the continue-as-new chain. */
  executions: { runId: string; status: string; events: HistoryEvent[] }[];
  /** Every child workflow any execution started (one level down), with its history. */
  children: { workflowId: string; runId: string; events: HistoryEvent[] }[];
}

/** Every execution of a workflow id (following continue-as-new from the first) and its children's histories, from Temporal. */
export async function fetchRunHistories(client: Client, workflowId: string, options: { children?: boolean } = {}): Promise<RunHistories> {
  const latest = await client.workflow.getHandle(workflowId).describe();
  let runId = latest.raw.workflowExecutionInfo?.firstRunId || latest.runId;
  const executions: RunHistories['executions'] = [];
  const children: RunHistories['children'] = [];
  for (;;) {
    const handle = client.workflow.getHandle(workflowId, runId);
    const [d, history] = await Promise.all([handle.describe(), handle.fetchHistory()]);
    const events = history.events ?? [];
    executions.push({ runId, status: d.status.name, events });
    if (options.children !== false) {
      for (const e of events) {
        const child = e.childWorkflowExecutionStartedEventAttributes?.workflowExecution;
        if (child?.workflowId && child.runId) {
          const childHistory = await client.workflow.getHandle(child.workflowId, child.runId).fetchHistory();
          children.push({ workflowId: child.workflowId, runId: child.runId, events: childHistory.events ?? [] });
        }
      }
    }
    if (d.status.name !== 'CONTINUED_AS_NEW') return { executions, children };
    const next = events.at(-1)?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId;
    if (!next) throw new Error(`execution ${runId} of ${workflowId} continued as new, but its history names no next run`);
    runId = next;
  }
}

/** One figure per step beside its goal (at most `goal`). */
export interface Goal {
  name: string;
  value: number;
  goal: number;
  holds: boolean;
}

/** The issue-18 goals per agent step: billable actions, history events, workflow tasks. */
export const STEP_GOALS = { actions: 1.2, events: 7, workflowTasks: 1.1 } as const;

/** Per-step figures of a run's own executions (children not included), beside the goals. */
export function stepGoals(counts: HistoryCounts, steps: number): Goal[] {
  const per = (n: number) => n / steps;
  const check = (name: string, value: number, goal: number): Goal => ({ name, value, goal, holds: value <= goal });
  return [
    check('billable actions (activities + local activities + upserts)', per(billableActions(counts).perStepKinds), STEP_GOALS.actions),
    check('history events', per(counts.events), STEP_GOALS.events),
    check('workflow tasks (completed)', per(counts.workflowTasks.completed), STEP_GOALS.workflowTasks),
  ];
}
