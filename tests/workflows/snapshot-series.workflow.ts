import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import type { RunEvent, SnapshotRow } from '@agentrun/contracts';
import { cancelRunSignal, statusQuery, type CaptureInput, type CaptureResult, type SnapshotSeriesConfig } from '@agentrun/workflows';
import { waitFor } from '../support/wait';
import { Deferred, failureOf, holdActivity, oneToN, seqsOf, toolResult, WorkflowTestEnv } from '../support/workflow-env';

let env: WorkflowTestEnv;
beforeAll(async () => {
  env = await WorkflowTestEnv.start();
});
afterAll(async () => {
  await env?.stop();
});

const series = (config: Partial<SnapshotSeriesConfig>): SnapshotSeriesConfig => ({
  interval_seconds: 0,
  per_turn: false,
  at_end: true,
  timeout_seconds: 30,
  max_snapshots: 24,
  ...config,
});
const landed = (input: CaptureInput): CaptureResult => ({
  artifact_id: `artifact-${input.snapshot_id}`,
  bundle_object_url: `s3://snapshots/${input.org}/${input.run_id}/snapshots/${input.snapshot_id}/workspace.tar.gz`,
  bytes: 4096,
  reasons: [],
});
const rowsOf = (events: RunEvent[]): SnapshotRow[] => events.filter((e) => e.type === 'snapshot_captured').map((e) => e.payload.snapshot as SnapshotRow);
const summary = (rows: SnapshotRow[]) => rows.map((r) => [r.snapshot_id, r.turn ?? null, r.is_final, r.capture_status, r.capture_reason ?? null]);
const capturesOf = (inputs: unknown[]) => (inputs as CaptureInput[]).map((c) => [c.snapshot_id, c.version, c.is_final, c.state.step]);

describe('the snapshot series', () => {
  it('per turn within the budget: the spent budget is recorded once, the final is still taken', async () => {
    const rig = env.rig({ snapshots: { captureSnapshot: async (input) => landed(input) } });
    await rig.run(async () => {
      const runId = rig.runId('per-turn');
      const handle = await rig.startAgent('per-turn', { max_steps: 4, snapshots: series({ per_turn: true, max_snapshots: 2 }) });
      expect(await handle.result()).toMatchObject({ status: 'done', steps: 4 });
      const events = rig.events(runId);
      expect(seqsOf(events)).toEqual(oneToN(events.length));
      const rows = rowsOf(events);
      expect(summary(rows)).toEqual([
        ['snap-0001', 1, false, 'ok', null],
        ['snap-0002', 2, false, 'ok', null],
        ['snap-0003', 3, false, 'skipped', 'limit_reached'],
        ['snap-0004', null, true, 'ok', null],
      ]);
      expect(rows.map((r) => r.step)).toEqual([1, 2, 3, 4]);
      expect(rows[3]).toMatchObject({ id: 'artifact-snap-0004', version: 4, bytes: 4096, source_context_id: runId, source_agent_name: 'AgentRun' });
      // Captured after the turn, before the next step: each row follows its turn's step_completed.
      const order = events.filter((e) => e.type === 'step_completed' || e.type === 'snapshot_captured').map((e) => (e.type === 'step_completed' ? `step ${e.payload.step as number}` : (e.payload.snapshot as SnapshotRow).snapshot_id));
      expect(order).toEqual(['step 0', 'snap-0001', 'step 1', 'snap-0002', 'step 2', 'snap-0003', 'step 3', 'snap-0004']);
      expect(capturesOf(rig.callsOf('captureSnapshot').map((c) => c.input))).toEqual([
        ['snap-0001', 1, false, 1],
        ['snap-0002', 2, false, 2],
        ['snap-0004', 4, true, 4],
      ]);
      expect((await handle.query(statusQuery)).snapshots).toEqual(rows);
    });
  });

  it('on a cadence: captures while a step runs, each a full interval after the last', async () => {
    const release = new Deferred();
    const rig = env.rig({
      snapshots: { captureSnapshot: async (input) => landed(input) },
      cpu: {
        runTool: async (call) => {
          await holdActivity(release.promise);
          return toolResult(call, 'cpu');
        },
      },
    });
    await rig.run(async () => {
      const runId = rig.runId('cadence');
      const handle = await rig.startAgent('cadence', { max_steps: 2, snapshots: series({ interval_seconds: 1 }) });
      await waitFor('two cadence captures during the held step', () => rowsOf(rig.events(runId)).length >= 2, 20_000, 20);
      release.resolve();
      expect(await handle.result()).toMatchObject({ status: 'done', steps: 2 });
      const rows = rowsOf(rig.events(runId));
      expect(rows.map((r) => r.snapshot_id)).toEqual(oneToN(rows.length).map((n) => `snap-${String(n).padStart(4, '0')}`));
      const interior = rows.slice(0, -1);
      expect(interior.length).toBeGreaterThanOrEqual(2);
      expect(interior.every((r) => r.turn === undefined && !r.is_final && r.capture_status === 'ok')).toBe(true);
      expect(rows.at(-1)).toMatchObject({ is_final: true, capture_status: 'ok' });
      const times = interior.map((r) => Date.parse(r.captured_at_utc));
      for (let i = 1; i < times.length; i++) expect(times[i] - times[i - 1]).toBeGreaterThanOrEqual(1_000);
    });
  });

  it('a failed interior capture is a failed row and the run goes on; a final that does not land fails the run', async () => {
    const rig = env.rig({
      snapshots: {
        captureSnapshot: async (input) => {
          if (input.is_final) throw ApplicationFailure.nonRetryable('workspace gone', 'WorkspaceMissing');
          if (input.version === 1) throw ApplicationFailure.nonRetryable('disk full', 'ArchiveFailed');
          return landed(input);
        },
      },
    });
    await rig.run(async () => {
      const runId = rig.runId('final-missing');
      const handle = await rig.startAgent('final-missing', { max_steps: 2, snapshots: series({ per_turn: true }) });
      const failure = await failureOf(handle.result());
      expect((failure as ApplicationFailure).type).toBe('final_snapshot_missing');
      expect(failure?.message).toBe(
        'the final snapshot did not land (failed: WorkspaceMissing: workspace gone); the agent finished but its end state cannot be inspected or forked',
      );
      const events = rig.events(runId);
      expect(seqsOf(events)).toEqual(oneToN(events.length));
      expect(summary(rowsOf(events))).toEqual([
        ['snap-0001', 1, false, 'failed', 'ArchiveFailed: disk full'],
        ['snap-0002', 2, false, 'ok', null],
        ['snap-0003', null, true, 'failed', 'WorkspaceMissing: workspace gone'],
      ]);
      expect(events.at(-1)).toMatchObject({ type: 'run_finished', payload: { state: { status: 'failed', reason: 'final_snapshot_missing' } } });
    });
  });

  it("an interior capture the snapshotter declines for the org's quota is a skipped row, and the run ends done with its final", async () => {
    const rig = env.rig({
      snapshots: {
        captureSnapshot: async (input) => {
          if (!input.is_final && input.version > 1) throw ApplicationFailure.nonRetryable("the run's snapshots hold 4096 bytes, org acme's limit (snapshot_bytes_per_run) is 1", 'quota_exceeded');
          return landed(input);
        },
      },
    });
    await rig.run(async () => {
      const runId = rig.runId('quota');
      const handle = await rig.startAgent('quota', { max_steps: 3, snapshots: series({ per_turn: true }) });
      await handle.result();
      const events = rig.events(runId);
      expect(seqsOf(events)).toEqual(oneToN(events.length));
      const reason = "quota_exceeded: the run's snapshots hold 4096 bytes, org acme's limit (snapshot_bytes_per_run) is 1";
      expect(summary(rowsOf(events))).toEqual([
        ['snap-0001', 1, false, 'ok', null],
        ['snap-0002', 2, false, 'skipped', reason],
        ['snap-0003', 3, false, 'skipped', reason],
        ['snap-0004', null, true, 'ok', null],
      ]);
      expect(events.at(-1)).toMatchObject({ type: 'run_finished', payload: { state: { status: 'done' } } });
    });
  });

  it('a capture that times out after its archive landed is a partial row carrying the archive', async () => {
    const rig = env.rig({
      snapshots: {
        captureSnapshot: async (input) => {
          if (input.version !== 1) return landed(input);
          // Reports the archive, then hangs on the trajectory until its deadline passes.
          const { bundle_object_url } = landed(input);
          await holdActivity(new Promise(() => undefined), () => ({ phase: 'trajectory', bytes: 2048, bundle_object_url }));
          throw new Error('unreachable: the capture is held until its deadline');
        },
      },
    });
    await rig.run(async () => {
      const runId = rig.runId('partial');
      const handle = await rig.startAgent('partial', { max_steps: 2, snapshots: series({ per_turn: true, timeout_seconds: 2 }) });
      expect(await handle.result()).toMatchObject({ status: 'done', steps: 2 });
      const rows = rowsOf(rig.events(runId));
      expect(summary(rows)).toEqual([
        ['snap-0001', 1, false, 'partial', 'capture_timeout_2s'],
        ['snap-0002', 2, false, 'ok', null],
        ['snap-0003', null, true, 'ok', null],
      ]);
      expect(rows[0]).toMatchObject({ version: 1, bytes: 2048, bundle_object_url: landed({ org: rig.org, run_id: runId, snapshot_id: 'snap-0001' } as CaptureInput).bundle_object_url });
    });
  });

  it('the final capture waits out an interior capture in flight, then is taken', async () => {
    const interiorRelease = new Deferred();
    const stepRelease = new Deferred();
    const rig = env.rig({
      snapshots: {
        captureSnapshot: async (input) => {
          if (!input.is_final) await holdActivity(interiorRelease.promise);
          return landed(input);
        },
      },
      cpu: {
        runTool: async (call) => {
          await holdActivity(stepRelease.promise);
          return toolResult(call, 'cpu');
        },
      },
    });
    await rig.run(async () => {
      const runId = rig.runId('final-waits');
      const handle = await rig.startAgent('final-waits', { max_steps: 2, snapshots: series({ interval_seconds: 1 }) });
      await rig.waitForCall('captureSnapshot', 'the first cadence capture to start');
      stepRelease.resolve();
      await rig.waitForEvent(runId, 'the last step', (e) => e.type === 'step_completed' && e.payload.step === 1);
      // The agent is done, but the run is not: the final waits for the lock the interior capture holds.
      expect(await handle.query(statusQuery)).toMatchObject({ status: 'running', step: 2 });
      expect(rig.callsOf('captureSnapshot')).toHaveLength(1);

      interiorRelease.resolve();
      expect(await handle.result()).toMatchObject({ status: 'done', steps: 2 });
      expect(summary(rowsOf(rig.events(runId)))).toEqual([
        ['snap-0001', null, false, 'ok', null],
        ['snap-0002', null, true, 'ok', null],
      ]);
    });
  });

  // The run's result after each: the workflow's own cancelled result, or Temporal's CancelledFailure.
  it.each([
    ['a cancel command', 'signal', expect.objectContaining({ status: 'cancelled', steps: 1 })],
    ['a Temporal cancel', 'temporal', expect.any(CancelledFailure)],
  ] as const)('%s during a capture gives it up at once and records the final as skipped / cancelled', async (_, how, ended) => {
    const cancelled = new Deferred<unknown>();
    const rig = env.rig({
      snapshots: {
        captureSnapshot: async () => {
          try {
            await holdActivity(new Promise(() => undefined));
          } catch (err) {
            cancelled.resolve(err);
            throw err;
          }
          throw new Error('a held capture only ends by being cancelled');
        },
      },
    });
    await rig.run(async () => {
      const runId = rig.runId(`cancel-capture-${how}`);
      // A capture bound of ten minutes: the run ends long before it, so it was not waited out.
      const handle = await rig.startAgent(`cancel-capture-${how}`, { max_steps: 4, snapshots: series({ per_turn: true, timeout_seconds: 600 }) });
      await rig.waitForCall('captureSnapshot', 'the turn-1 capture to start');
      const result = how === 'signal' ? handle.signal(cancelRunSignal, { command_id: 'cancel-1' }).then(() => handle.result()) : handle.cancel().then(() => failureOf(handle.result()));
      expect(await result).toEqual(ended);
      expect(await cancelled.promise).toBeInstanceOf(CancelledFailure);
      const events = rig.events(runId);
      expect(seqsOf(events)).toEqual(oneToN(events.length));
      // The interrupted capture records nothing; the final row says why there is no final.
      expect(summary(rowsOf(events))).toEqual([['snap-0002', null, true, 'skipped', 'cancelled']]);
      expect(events.at(-1)).toMatchObject({ type: 'run_finished', payload: { state: { status: 'cancelled' } } });
      expect(rig.callsOf('captureSnapshot')).toHaveLength(1);
    });
  });

  it('continues as new with the outbox and the series carried: seqs, ordinals and the budget go on', async () => {
    const rig = env.rig({ snapshots: { captureSnapshot: async (input) => landed(input) } });
    await rig.run(async () => {
      const runId = rig.runId('carry');
      const handle = await rig.startAgent('carry', { max_steps: 6, steps_per_execution: 2, snapshots: series({ per_turn: true, max_snapshots: 3 }) });
      const result = await handle.result();
      expect(result).toMatchObject({ status: 'done', steps: 6 });
      const events = rig.events(runId);
      // Three executions, one gapless sequence: every event once, in order, none lost at a hand-over.
      expect(seqsOf(events)).toEqual(oneToN(events.length));
      expect(result.last_seq).toBe(events.length);
      expect(events.filter((e) => e.type === 'step_completed').map((e) => e.payload.step)).toEqual([0, 1, 2, 3, 4, 5]);
      expect(events.filter((e) => e.type === 'run_started')).toHaveLength(1);
      // The budget is spent in the second execution and recorded once; the third takes only the final.
      expect(summary(rowsOf(events))).toEqual([
        ['snap-0001', 1, false, 'ok', null],
        ['snap-0002', 2, false, 'ok', null],
        ['snap-0003', 3, false, 'ok', null],
        ['snap-0004', 4, false, 'skipped', 'limit_reached'],
        ['snap-0005', null, true, 'ok', null],
      ]);
      expect(capturesOf(rig.callsOf('captureSnapshot').map((c) => c.input))).toEqual([
        ['snap-0001', 1, false, 1],
        ['snap-0002', 2, false, 2],
        ['snap-0003', 3, false, 3],
        ['snap-0005', 5, true, 6],
      ]);
      const view = await handle.query(statusQuery);
      expect(view.execution_id).not.toBe(handle.firstExecutionRunId);
      expect(view).toMatchObject({ execution_started_at_step: 4, last_seq: events.length });
      const executions = await waitFor(
        'three executions in visibility',
        async () => {
          const runs = [];
          for await (const run of rig.client.workflow.list({ query: `WorkflowId = '${rig.org}/${runId}'` })) runs.push(run);
          return runs.length === 3 ? runs : undefined;
        },
        20_000,
        100,
      );
      expect(executions.map((r) => r.status.name).sort()).toEqual(['COMPLETED', 'CONTINUED_AS_NEW', 'CONTINUED_AS_NEW']);
    });
  });

  it('each capture is told the newest segment that landed: a capture whose trajectory failed moves nothing, across continue-as-new', async () => {
    // A snapshotter double that writes segments of three events per capture after the one it is told of.
    const rig = env.rig({
      snapshots: {
        captureSnapshot: async (input) => {
          if (input.version === 2) return { ...landed(input), reasons: ['trajectory_read_failed: the database went away'] };
          const first = (input.trajectory_after?.last_seq ?? 0) + 1;
          return { ...landed(input), trajectory_s3_uri: `s3://t/to-${first + 2}.jsonl`, trajectory_segment: { first_seq: first, last_seq: first + 2 } };
        },
      },
    });
    await rig.run(async () => {
      const runId = rig.runId('segments');
      const handle = await rig.startAgent('segments', { max_steps: 4, steps_per_execution: 2, snapshots: series({ per_turn: true }) });
      expect(await handle.result()).toMatchObject({ status: 'done', steps: 4 });
      const told = rig.callsOf('captureSnapshot').map((c) => [(c.input as CaptureInput).snapshot_id, (c.input as CaptureInput).trajectory_after ?? null]);
      expect(told).toEqual([
        ['snap-0001', null],
        ['snap-0002', { first_seq: 1, last_seq: 3 }],
        // snap-0002 landed its archive but not its trajectory: the next segment starts after snap-0001's.
        ['snap-0003', { first_seq: 1, last_seq: 3 }],
        ['snap-0004', { first_seq: 4, last_seq: 6 }],
        ['snap-0005', { first_seq: 7, last_seq: 9 }],
      ]);
      const rows = rowsOf(rig.events(runId));
      expect(rows.map((r) => [r.snapshot_id, r.trajectory_first_seq ?? null, r.trajectory_last_seq ?? null])).toEqual([
        ['snap-0001', 1, 3],
        ['snap-0002', null, null],
        ['snap-0003', 4, 6],
        ['snap-0004', 7, 9],
        ['snap-0005', 10, 12],
      ]);
      expect(rows[1]).toMatchObject({ capture_status: 'partial' });
    });
  });
});
