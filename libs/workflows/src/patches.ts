import { patched } from '@temporalio/workflow';

/** Whether this execution takes a patch's new code: `patched(id)`, or what stands for it. */
export interface Patches {
  has(id: string): boolean;
}

/**
 * Several patches behind one marker. Each `patched()` call that returns true records a marker and, as
 * the SDK indexes patch ids for visibility, an `UpsertWorkflowSearchAttributes` of
 * `TemporalChangeVersion`: two history events, one of them a billable action, per patch per execution.
 * An AgentRun asked three in every new execution, most of what a short run spent on upserts.
 *
 * Executions recorded with the `baseline` marker take every `covered` patch without asking: one
 * marker and one upsert for them all. Executions recorded before it (no such marker: their replay
 * answers false) ask each patch where they always did, so their histories replay unchanged.
 *
 * The baseline is asked when this is built, so build it first thing in the workflow function: the marker
 * must land in the execution's first task. Asked later, an execution begun on older code would be
 * answered true mid-way in its live run and false when replayed from the start.
 */
export function patchesSince(baseline: string, covered: readonly string[]): Patches {
  const recordedWithAll = patched(baseline);
  const all = new Set(covered);
  return { has: (id) => (recordedWithAll && all.has(id)) || patched(id) };
}
