import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createAgentActivities, createChatClient, CPU_TOOLS, GPU_TOOLS, LocalObjectStore } from '@agentrun/activities';
import { startModelServer, type ModelServer } from '../../apps/model-server/src/model-server';
import { createDataSource, EffectLedger, GpuLeases, migrate } from '@agentrun/persistence';
import type { ModelReply, ToolResult } from '@agentrun/workflows';
import type { DataSource } from 'typeorm';
import { freshDatabase } from '../support/database';

/**
 * The effect ledger on real Postgres with a real model server: the activity functions run as a
 * worker would run them (the SDK's activity environment supplies attempt numbers), and a retry is
 * simply the same call again with a higher attempt.
 */
describe('effects happen once per idempotency key', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  let dataSource: DataSource;
  let model: ModelServer;
  let root: string;

  beforeAll(async () => {
    db = await freshDatabase();
    dataSource = createDataSource({ url: db.url, poolSize: 2, applicationName: 'effects-test' });
    await dataSource.initialize();
    await migrate(dataSource);
    model = await startModelServer({ port: 0 });
    root = await mkdtemp(join(tmpdir(), 'effects-'));
  });
  afterAll(async () => {
    await model?.close();
    await dataSource?.destroy();
    await db?.drop();
    await rm(root, { recursive: true, force: true });
  });

  const activities = (tools = CPU_TOOLS) =>
    createAgentActivities({
      workspaceRoot: join(root, 'ws'),
      effects: new EffectLedger(dataSource),
      tools,
      chat: createChatClient({ baseUrl: model.url, model: 'scripted', timeoutMs: 5_000 }),
      compensations: new GpuLeases(dataSource),
      gpuLeases: new GpuLeases(dataSource),
      payloads: { store: new LocalObjectStore(join(root, 'objects')), inlineMaxBytes: 128 * 1024 },
    });
  const attempt = (n: number) => new MockActivityEnvironment({ attempt: n, taskQueue: 'cpu-tools' });

  it('a model call whose completion was lost is answered from the ledger on retry: one bill', async () => {
    const call = { key: 'acme/r1:0:abc', org: 'acme', run_id: 'r1', messages: [{ role: 'user' as const, content: 'hello' }], tools: [] };
    const first: ModelReply = await attempt(1).run(activities().callModel, call);
    const billed = model.requests;
    // The completion never reached Temporal; it retries the same call.
    const retry: ModelReply = await attempt(2).run(activities().callModel, call);
    expect(model.requests).toBe(billed);
    expect(retry).toEqual({ ...first, duplicate: true });
    expect(first.duplicate).toBe(false);
  });

  it("a fork meeting a call its parent recorded before the fork point reuses the parent's result: nothing billed", async () => {
    const parentCall = { key: 'acme/parent:4:abc', org: 'acme', run_id: 'parent', messages: [{ role: 'user' as const, content: 'step 4' }], tools: [] };
    const first: ModelReply = await attempt(1).run(activities().callModel, parentCall);
    const billed = model.requests;
    const forkCall = { ...parentCall, key: 'acme/fork:4:abc', run_id: 'fork', reuse_key: parentCall.key };
    const reused: ModelReply = await attempt(1).run(activities().callModel, forkCall);
    expect(model.requests).toBe(billed);
    expect(reused).toMatchObject({ key: forkCall.key, content: first.content, duplicate: true });
    const rows = await dataSource.query('SELECT effect FROM effect_ledger WHERE idempotency_key = $1', [forkCall.key]);
    expect(rows).toEqual([{ effect: 'reuse:model' }]);
    // A reuse key the parent never recorded is a call like any other.
    await attempt(1).run(activities().callModel, { ...forkCall, key: 'acme/fork:5:def', reuse_key: 'acme/parent:5:def' });
    expect(model.requests).toBe(billed + 1);
  });

  it('a tool whose completion was lost does not run again, and its GPU lease is gone', async () => {
    const gpu = activities(GPU_TOOLS);
    const call = { key: 'acme/r2:2:def', org: 'acme', run_id: 'r2', tool: 'embed', args: { text: 'the parser leaks' } };
    const first: ToolResult = await attempt(1).run(gpu.runTool, call);
    const retry: ToolResult = await attempt(2).run(gpu.runTool, call);
    expect(retry).toEqual({ ...first, duplicate: true });
    const [{ n }] = await dataSource.query(`SELECT count(*) AS n FROM effect_ledger WHERE idempotency_key = $1`, [call.key]);
    expect(Number(n)).toBe(1);
    expect(await new GpuLeases(dataSource).heldBy('acme', 'r2')).toEqual([]);
  });

  it('compensation releases a lease a dead attempt left behind, and releasing twice is releasing once', async () => {
    const leases = new GpuLeases(dataSource);
    await leases.acquire('acme/r3:2:ghi', 'acme', 'r3', 'dead-worker');
    const undo = activities().compensate;
    expect(await attempt(1).run(undo, { org: 'acme', run_id: 'r3', name: 'release_gpu:acme/r3:2:ghi' })).toMatch(/^released/);
    expect(await attempt(2).run(undo, { org: 'acme', run_id: 'r3', name: 'release_gpu:acme/r3:2:ghi' })).toMatch(/^no GPU was held/);
    expect(await leases.heldBy('acme', 'r3')).toEqual([]);
  });

  it('a model the request is refused by is a non-retryable failure; a 429 is retryable with its delay', async () => {
    const refused = { key: 'acme/r4:0:x', org: 'acme', run_id: 'r4', messages: [{ role: 'user' as const, content: '[scenario:bad_request] hi' }], tools: [] };
    await expect(attempt(1).run(activities().callModel, refused)).rejects.toMatchObject({ type: 'BadArguments', nonRetryable: true });
    const limited = { key: 'acme/r4:1:y', org: 'acme', run_id: 'r4', messages: [{ role: 'user' as const, content: '[scenario:rate_limited] hi' }], tools: [] };
    await expect(attempt(1).run(activities().callModel, limited)).rejects.toMatchObject({ type: 'Model_rate_limited', nonRetryable: false, nextRetryDelay: 1000 });
  });
});
