import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { temporal } from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { REPLAY_SINKS } from '../support/histories';
import { REPO_ROOT } from '../support/stack-env';

/**
 * Saved histories (protobuf, as the server sends them) of real executions (an AgentRun that crossed a kill -9 of its worker, one of
 * its ResearchAgent children, a run with a cadence and per-turn snapshot series, and a fork) replay through the current workflow code. A change that would break
 * executions already running fails here. Refresh them, after a deliberate versioned change, with
 * `UPDATE_HISTORY_FIXTURES=1 npx jest tests/e2e/agent-run.e2e.ts tests/e2e/snapshots.e2e.ts --selectProjects e2e`.
 *
 * `agent-run-busy` is a long run whose steps, events and search-attribute upserts often land in one
 * workflow task: it fails when a step's result reaches the loop one microtask turn later than it did, a
 * reordering the other histories do not show. It comes from tests/e2e/bad-input.e2e.ts and is kept as is.
 *
 * Five shapes of how run events leave. The `-by-activity` histories (and `agent-run-busy`,
 * `eval-run-cancelled`) were recorded first: `publishRunEvents` activities and a `CurrentStep` upsert
 * per step, no patch marker. The `-by-workflow-task` ones were recorded while the workflow-task sink was
 * the default: no publishing activity, the sink's patch marker, `CurrentStep` every 20 steps. The
 * `-by-activity-every-20` ones publish by activity with the marker of the patch that upserts
 * `CurrentStep` every 20 steps (runs started with AGENTRUN_RUN_EVENTS_VIA=activity). The
 * `-carried-cpu-only` ones carry events on their `cpu-tools` calls (an extra argument), the rest by
 * activity, the GPU steps' events among them. The `-patch-markers` ones carry as today: the `gpu-tools`
 * calls carry too, and a research child's model call carries the events its parent handed it in its
 * input, each behaviour under a marker of its own (`gpu-calls-carry-run-events`,
 * `current-step-upserted-every-20-steps`, `research-children-carry-run-events`, each with its
 * `TemporalChangeVersion` upsert; `research-agent-uncarried` is a child started before, without events
 * in its input). The rest are today's shape: the same calls under one marker, `agent-run-baseline-2026-12`,
 * which stands for every patch an AgentRun asks.
 *
 * `eval-run-cancelled` is an EvalRun cancelled while two cases ran, recorded in the workflow tier before
 * its cases waited for their own answer at a cancel: it fails if that behaviour reaches such runs unpatched.
 */
describe('workflow code replays the saved histories', () => {
  const dir = join(REPO_ROOT, 'tests/fixtures/histories');
  const files = readdirSync(dir).filter((f) => f.endsWith('.history.pb'));
  const workflowIds = JSON.parse(readFileSync(join(dir, 'workflow-ids.json'), 'utf8')) as Record<string, string>;

  it('has histories to replay', () => {
    expect(files).toEqual(
      expect.arrayContaining([
        'agent-run.history.pb',
        'agent-run-by-activity.history.pb',
        'agent-run-by-workflow-task.history.pb',
        'agent-run-by-activity-every-20.history.pb',
        'agent-run-busy.history.pb',
        'research-agent.history.pb',
        'research-agent-uncarried.history.pb',
        'snapshot-series.history.pb',
        'snapshot-series-by-activity.history.pb',
        'snapshot-series-by-workflow-task.history.pb',
        'snapshot-series-by-activity-every-20.history.pb',
        'fork.history.pb',
        'fork-by-activity.history.pb',
        'fork-by-workflow-task.history.pb',
        'fork-by-activity-every-20.history.pb',
        'agent-run-carried-cpu-only.history.pb',
        'snapshot-series-carried-cpu-only.history.pb',
        'fork-carried-cpu-only.history.pb',
        'agent-run-patch-markers.history.pb',
        'snapshot-series-patch-markers.history.pb',
        'fork-patch-markers.history.pb',
        'eval-run-cancelled.history.pb',
      ]),
    );
  });

  it.each(files)('%s replays without nondeterminism', async (file) => {
    const history = temporal.api.history.v1.History.decode(readFileSync(join(dir, file)));
    // The replay throws (DeterminismViolationError) if today's workflow code takes another path than the history.
    await expect(
      Worker.runReplayHistory(
        { workflowBundle: { codePath: join(REPO_ROOT, 'libs/workflows/dist/workflow-bundle.js') }, replayName: file, sinks: REPLAY_SINKS },
        history,
        workflowIds[file],
      ),
    ).resolves.toBeUndefined();
    // A replay loads the bundle into a worker of its own: seconds each when lint shares the machine.
  }, 60_000);
});
