import { temporal } from '@temporalio/proto';
import { addCounts, billableActions, countHistory, eventTimeMs, eventTypeName, stepGoals, type HistoryEvent } from '../support/history-counts';

const T = temporal.api.enums.v1.EventType;
let id = 0;
/** An event as Temporal's client returns it (int64 fields as Long), from plain values. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- fromObject takes plain JSON-like values
const ev = (eventType: temporal.api.enums.v1.EventType, attrs: Record<string, any> = {}): HistoryEvent => temporal.api.history.v1.HistoryEvent.fromObject({ eventId: ++id, eventType, ...attrs });
const wft = (): HistoryEvent[] => [ev(T.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED), ev(T.EVENT_TYPE_WORKFLOW_TASK_STARTED), ev(T.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)];
const payload = (text: string) => ({ metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from(JSON.stringify(text)) });

/**
 * Two steps of a made-up run: a client start, a tool activity retried once, a publish activity, two
 * local activities recorded by one workflow task and one by another, a CurrentStep upsert, a
 * version-only upsert, a timer, a signal in, a child workflow, then continue-as-new.
 */
function firstExecution(): HistoryEvent[] {
  id = 0;
  const events: HistoryEvent[] = [ev(T.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, { workflowExecutionStartedEventAttributes: {} }), ...wft()];
  const scheduled = ev(T.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, { activityTaskScheduledEventAttributes: { activityType: { name: 'runTool' } } });
  events.push(scheduled, ev(T.EVENT_TYPE_ACTIVITY_TASK_STARTED, { activityTaskStartedEventAttributes: { scheduledEventId: scheduled.eventId, attempt: 2 } }), ev(T.EVENT_TYPE_ACTIVITY_TASK_COMPLETED));
  events.push(...wft());
  const completed = events.at(-1)!;
  events.push(ev(T.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, { activityTaskScheduledEventAttributes: { activityType: { name: 'publishRunEvents' } } }));
  events.push(ev(T.EVENT_TYPE_MARKER_RECORDED, { markerRecordedEventAttributes: { markerName: 'core_local_activity', workflowTaskCompletedEventId: completed.eventId } }));
  events.push(ev(T.EVENT_TYPE_MARKER_RECORDED, { markerRecordedEventAttributes: { markerName: 'core_local_activity', workflowTaskCompletedEventId: completed.eventId } }));
  events.push(ev(T.EVENT_TYPE_MARKER_RECORDED, { markerRecordedEventAttributes: { markerName: 'core_patch', workflowTaskCompletedEventId: completed.eventId } }));
  events.push(ev(T.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, { upsertWorkflowSearchAttributesEventAttributes: { searchAttributes: { indexedFields: { CurrentStep: payload('1') } } } }));
  events.push(ev(T.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, { upsertWorkflowSearchAttributesEventAttributes: { searchAttributes: { indexedFields: { TemporalChangeVersion: payload('v') } } } }));
  events.push(ev(T.EVENT_TYPE_TIMER_STARTED));
  // The publish activity never started (e.g. cancelled): no action.
  events.push(ev(T.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED), ...wft());
  const second = events.at(-1)!;
  events.push(ev(T.EVENT_TYPE_MARKER_RECORDED, { markerRecordedEventAttributes: { markerName: 'core_local_activity', workflowTaskCompletedEventId: second.eventId } }));
  events.push(ev(T.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED, { startChildWorkflowExecutionInitiatedEventAttributes: { workflowType: { name: 'ResearchAgent' } } }));
  events.push(...wft(), ev(T.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW));
  return events;
}

describe('history counts', () => {
  it('names event types as the history does, and reads event times', () => {
    expect(eventTypeName(T.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)).toBe('WorkflowTaskCompleted');
    expect(eventTypeName(T.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES)).toBe('UpsertWorkflowSearchAttributes');
    expect(eventTimeMs(ev(T.EVENT_TYPE_TIMER_FIRED, { eventTime: { seconds: 1_700_000_000, nanos: 250_000_000 } }))).toBe(1_700_000_000_250);
  });

  it('counts each kind of event of a hand-made history', () => {
    const c = countHistory(firstExecution());
    expect(c.events).toBe(27);
    expect(c.workflowTasks).toEqual({ scheduled: 4, completed: 4, failed: 0, timedOut: 0, events: 12 });
    expect(c.activities).toEqual({ scheduled: 2, attempts: 2, events: 4, byType: { runTool: 1, publishRunEvents: 1 } });
    expect(c.localActivities).toEqual({ markers: 3, workflowTasks: 2 });
    expect(c.upserts).toEqual({ events: 2, billable: 1 });
    expect(c.starts).toEqual({ client: 1, continueAsNew: 0, child: 0 });
    expect(c.children).toEqual({ initiated: 1, byType: { ResearchAgent: 1 } });
    expect(c.timers).toBe(1);
    expect(c.signals).toEqual({ received: 1, sent: 0 });
    expect(c.byType.MarkerRecorded).toBe(4);
  });

  it('counts actions as Temporal Cloud does: attempts, local activities per workflow task, upserts, starts, children twice', () => {
    const next: HistoryEvent[] = [ev(T.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, { workflowExecutionStartedEventAttributes: { continuedExecutionRunId: 'r1' } }), ...wft(), ev(T.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED)];
    const child: HistoryEvent[] = [ev(T.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, { workflowExecutionStartedEventAttributes: { parentWorkflowExecution: { workflowId: 'p', runId: 'r1' } } }), ...wft()];
    const run = addCounts(countHistory(firstExecution()), countHistory(next));
    const a = billableActions(run);
    // 2 attempts of runTool, 2 workflow tasks with local activities, 1 billable upsert.
    expect(a).toMatchObject({ activities: 2, localActivities: 2, upserts: 1, perStepKinds: 5 });
    expect(a).toMatchObject({ workflowStarts: 1, continueAsNew: 1, childWorkflows: 2, timers: 1, signals: 1, updates: 0, total: 11 });
    // The child's own start is the second of its parent's two actions, not a third.
    expect(billableActions(addCounts(run, countHistory(child))).total).toBe(11);
    expect(run.histories).toBe(2);
    expect(run.events).toBe(32);
  });

  it('puts the per-step figures beside the goals', () => {
    const run = countHistory(firstExecution());
    const [actions, events, tasks] = stepGoals(run, 5);
    expect(actions).toMatchObject({ value: 1, goal: 1.2, holds: true });
    expect(events).toMatchObject({ value: 27 / 5, goal: 7, holds: true });
    expect(tasks).toMatchObject({ value: 0.8, goal: 1.1, holds: true });
    expect(stepGoals(run, 2).map((g) => g.holds)).toEqual([false, false, false]);
  });
});
