import type { RunEvent } from '@agentrun/contracts';
import type { CaptureInput, ForkState, ModelCall, RestoreResult, ToolCall } from '@agentrun/workflows';
import { oneToN, seqsOf, type ActivityCall, type Rig, WorkflowTestEnv } from '../support/workflow-env';

let env: WorkflowTestEnv;
beforeAll(async () => {
  env = await WorkflowTestEnv.start();
});
afterAll(async () => {
  await env?.stop();
});

/** `{workflow_id}:{step}:{digest}`: the step a recorded effect belongs to. */
const stepOfKey = (key: string): number => Number(key.split(':').at(-2));
/** The model and tool calls a run made itself (a research child's calls carry the child's workflow id). */
const effectCalls = (rig: Rig, workflowId: string): (ToolCall | ModelCall)[] =>
  rig.calls
    .filter((c: ActivityCall) => c.name === 'runTool' || c.name === 'callModel')
    .map((c) => c.input as ToolCall | ModelCall)
    .filter((call) => call.key.startsWith(`${workflowId}:`));
const duplicates = (events: RunEvent[]) => events.filter((e) => e.type === 'step_completed').map((e) => [e.payload.step, e.payload.duplicate]);

describe('a fork', () => {
  it("reuses the parent's effects recorded at or after the fork point, and a new goal reuses none", async () => {
    const captured = new Map<string, ForkState>();
    let restore: RestoreResult | undefined;
    const rig = env.rig({
      snapshots: {
        captureSnapshot: async (input: CaptureInput) => {
          captured.set(input.snapshot_id, input.state);
          return { artifact_id: `a-${input.snapshot_id}`, bundle_object_url: `s3://snapshots/${input.snapshot_id}.tar.gz`, bytes: 10, reasons: [] };
        },
      },
      cpu: {
        restoreSnapshot: async () => {
          if (!restore) throw new Error('no snapshot to restore yet');
          return restore;
        },
      },
    });
    await rig.run(async () => {
      const parentId = rig.runId('parent');
      const parentWorkflowId = `${rig.org}/${parentId}`;
      const parent = await rig.startAgent('parent', { max_steps: 6, snapshots: { interval_seconds: 0, per_turn: true, at_end: true, timeout_seconds: 30, max_snapshots: 24 } });
      expect(await parent.result()).toMatchObject({ status: 'done', steps: 6 });

      // What the snapshotter would answer for the turn-2 snapshot: the state then, and the parent's
      // effect keys from that step on.
      const state = captured.get('snap-0002')!;
      expect(state).toMatchObject({ step: 2, goal: 'find the answer', max_steps: 6, policy: 'scripted', tier: 'team' });
      const parentKeys = effectCalls(rig, parentWorkflowId).map((c) => c.key);
      const reusable = parentKeys.filter((key) => stepOfKey(key) >= 2);
      restore = { state, reusable_keys: reusable, files: 3, bytes: 2048 };

      const forkId = rig.runId('fork');
      const forkWorkflowId = `${rig.org}/${forkId}`;
      const fork = await rig.startAgent('fork', { max_steps: 6, fork: { from_run_id: parentId, from_workflow_id: parentWorkflowId, snapshot_id: 'snap-0002' } });
      expect(await fork.result()).toMatchObject({ status: 'done', steps: 6, duplicates_suppressed: 3 });
      expect(rig.callsOf('restoreSnapshot').map((c) => c.input)).toEqual([{ org: rig.org, run_id: forkId, from_run_id: parentId, snapshot_id: 'snap-0002' }]);
      // A fork's workspace is the restored one: it is not prepared afresh.
      expect(rig.callsOf('prepareWorkspace')).toHaveLength(1);

      // Steps 2 (GPU tool), 4 (model) and 5 (CPU tool) are the parent's calls again, so each names the parent's key.
      const forkCalls = effectCalls(rig, forkWorkflowId);
      expect(forkCalls.map((c) => [stepOfKey(c.key), c.reuse_key])).toEqual([
        [2, parentKeys.find((k) => stepOfKey(k) === 2)],
        [4, parentKeys.find((k) => stepOfKey(k) === 4)],
        [5, parentKeys.find((k) => stepOfKey(k) === 5)],
      ]);
      expect(forkCalls.map((c) => c.reuse_key)).toEqual(forkCalls.map((c) => parentWorkflowId + c.key.slice(forkWorkflowId.length)));

      const events = rig.events(forkId);
      expect(seqsOf(events)).toEqual(oneToN(events.length));
      expect(events[0]).toMatchObject({
        type: 'run_started',
        payload: { forked_from: { run_id: parentId, snapshot_id: 'snap-0002', step: 2 }, restored: { files: 3, bytes: 2048 }, state: { forked_from_snapshot: 'snap-0002', step: 2 } },
      });
      // The research child (step 3) is the fork's own and not a reuse; the rest were answered from the ledger.
      expect(duplicates(events)).toEqual([
        [2, true],
        [3, false],
        [4, true],
        [5, true],
      ]);

      const renamed = await rig.startAgent('fork-new-goal', {
        max_steps: 6,
        fork: { from_run_id: parentId, from_workflow_id: parentWorkflowId, snapshot_id: 'snap-0002', goal: 'another question' },
      });
      expect(await renamed.result()).toMatchObject({ status: 'done', steps: 6, duplicates_suppressed: 0 });
      const renamedCalls = effectCalls(rig, `${rig.org}/${rig.runId('fork-new-goal')}`);
      expect(renamedCalls).toHaveLength(3);
      expect(renamedCalls.every((c) => c.reuse_key === undefined)).toBe(true);
      const renamedEvents = rig.events(rig.runId('fork-new-goal'));
      expect(renamedEvents[0].payload.state).toMatchObject({ goal: 'another question', step: 2 });
      expect(duplicates(renamedEvents).every(([, duplicate]) => duplicate === false)).toBe(true);
    });
  });
});
