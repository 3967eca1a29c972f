import { TOPICS, type RunEventEnvelope } from '@agentrun/contracts';
import { Client as PgClient } from 'pg';
import { APPS, Platform, uniqueId, type AppName } from '../support/platform';
import { parse, total, type Sample } from '../support/prometheus';
import { stackUrls } from '../support/stack-env';
import { waitFor } from '../support/wait';

/*
 * Issue 17, part 1: every app's GET /metrics on the real platform. Each process exports what it
 * emits, the counters move with the work the test does (commands decided, events projected, SSE
 * frames written, model tokens), the consumer lag returns to 0, and the processes with Temporal
 * workers serve the SDK's own worker metrics within the same scrape.
 */

/** Families declared by `# TYPE` lines, in order (a name twice is an exposition Prometheus refuses). */
function declaredFamilies(text: string): string[] {
  return [...text.matchAll(/^# TYPE (\S+) \S+$/gm)].map((m) => m[1]);
}

describe('GET /metrics on every app', () => {
  const platform = new Platform();
  const org = 'acme';

  beforeAll(() => platform.start());
  afterAll(() => platform.stop());

  const scrapeText = async (app: AppName): Promise<{ status: number; contentType: string; text: string; ms: number }> => {
    const started = performance.now();
    const res = await fetch(`http://127.0.0.1:${platform.ports[app]}/metrics`);
    const text = await res.text();
    return { status: res.status, contentType: res.headers.get('content-type') ?? '', text, ms: performance.now() - started };
  };
  const scrape = async (app: AppName): Promise<Sample[]> => parse((await scrapeText(app)).text);

  it('answers Prometheus text on each health port with only the families that app emits, and no name twice', async () => {
    const families: Record<string, string[]> = {};
    for (const app of APPS) {
      const answer = await scrapeText(app);
      // Prometheus' text format 0.0.4 (Express orders the parameters its own way).
      const [type, ...params] = answer.contentType.split(';').map((p) => p.trim());
      expect({ app, status: answer.status, type, params: params.sort() }).toEqual({ app, status: 200, type: 'text/plain', params: ['charset=utf-8', 'version=0.0.4'] });
      const declared = declaredFamilies(answer.text);
      expect({ app, twice: declared.filter((name, i) => declared.indexOf(name) !== i) }).toEqual({ app, twice: [] });
      expect(declared).toEqual(expect.arrayContaining(['process_cpu_user_seconds_total', 'nodejs_eventloop_lag_seconds']));
      // Every app reports its readiness (the not-ready alert reads it): ready, every check ok.
      const readiness = ['agentrun_readiness_check', 'agentrun_ready'];
      families[app] = declared.filter((n) => n.startsWith('agentrun_') && !readiness.includes(n)).sort();
      const samples = parse(answer.text);
      const checks = samples.filter((s) => s.name === 'agentrun_readiness_check');
      expect({ app, ready: total(samples, 'agentrun_ready'), checks: checks.length > 0, failing: checks.filter((s) => s.value !== 1).map((s) => s.labels.check) }).toEqual({ app, ready: 1, checks: true, failing: [] });
    }
    const model = ['agentrun_model_call_duration_seconds', 'agentrun_model_tokens_total'];
    // With the reader of model reply deltas, its count of records it skipped.
    // Both start workflows (the gateway for commands sent over HTTP): each counts its starts.
    expect(families.gateway).toEqual(['agentrun_event_visible_seconds', 'agentrun_http_request_duration_seconds', 'agentrun_http_requests_total', 'agentrun_run_token_records_unreadable_total', 'agentrun_sse_errors_total', 'agentrun_sse_streams', 'agentrun_workflow_starts_total']);
    // With the workflows role, the run-event publisher's two counters (made with the workflow worker).
    const publishing = ['agentrun_run_event_publish_failures_total', 'agentrun_run_events_published_total'];
    // And the stalled-carrier watch's counter, made with the workflow worker too.
    // With the cpu-tools role, the calls told to wait for a rate-limit turn and the reply deltas not sent.
    expect(families.orchestrator).toEqual(['agentrun_commands_total', 'agentrun_dlq_total', 'agentrun_kafka_consumer_lag', 'agentrun_model_call_duration_seconds', 'agentrun_model_rate_limit_waits_total', 'agentrun_model_tokens_total', ...publishing, 'agentrun_run_token_deltas_dropped_total', 'agentrun_stalled_carrier_events_total', 'agentrun_workflow_starts_total']);
    expect(families.projector).toEqual(['agentrun_dlq_total', 'agentrun_kafka_consumer_lag', 'agentrun_projector_batch_duration_seconds', 'agentrun_projector_events_total', 'agentrun_runs_active']);
    // The GPU worker's model clients are made for the first eval that needs one, its publishing counters
    // with the first GPU call that carries run events; the snapshotter calls no model.
    expect(families['gpu-worker'].filter((name) => !model.includes(name) && !publishing.includes(name))).toEqual([]);
    expect(families.snapshotter).toEqual([]);
  });

  it('serves the Temporal SDK worker metrics within the scrape of the apps that run workers, and not on the others', async () => {
    for (const app of ['orchestrator', 'gpu-worker', 'snapshotter'] as const) {
      const names = await waitFor(`${app}'s Temporal worker metrics`, async () => {
        const samples = await scrape(app);
        const temporal = new Set(samples.filter((s) => s.name.startsWith('temporal_')).map((s) => s.name));
        return temporal.has('temporal_worker_task_slots_available') && temporal;
      }, 30_000, 250);
      expect(names.size).toBeGreaterThan(3);
      if (app === 'orchestrator') console.log(`Temporal SDK metrics on the orchestrator: ${[...names].sort().join(' ')}`);
    }
    for (const app of ['gateway', 'projector'] as const) expect((await scrape(app)).some((s) => s.name.startsWith('temporal_'))).toBe(false);
  });

  it('counts a run end to end: decisions by type and outcome, DLQ, events projected as published, one visibility observation per SSE frame, model tokens, lag back to 0', async () => {
    const runEvents = await platform.follow<RunEventEnvelope>(TOPICS.runEvents);
    const before = { orchestrator: await scrape('orchestrator'), gateway: await scrape('gateway'), projector: await scrape('projector') };
    const accepted = (s: Sample[]) => total(s, 'agentrun_commands_total', { type: 'agent.start', outcome: 'accepted', reason: '' });

    const runId = uniqueId('metrics');
    const start = { command_id: uniqueId('c'), type: 'agent.start', org, run_id: runId, payload: { goal: '[scenario:agent] find the parser notes', max_steps: 12, policy: 'llm' } };
    await platform.publishCommand(start);
    await platform.publishCommand(start); // the same command again: a duplicate
    await platform.publishCommand({ command_id: uniqueId('c'), type: 'agent.teleport', org, run_id: runId, payload: {} });
    await platform.publishCommands([{ key: runId, value: 'not json at all' }]);

    // The stream, read from its first event to its end frame, as a client would.
    // One stream only (a 404 before the start is decided opens none), so every frame written is one this test reads.
    const stream = await waitFor('the SSE stream to open', async () => {
      const res = await fetch(`${platform.gatewayUrl}/runs/${runId}/events`, { headers: { 'X-Org': org } });
      if (res.status === 200) return res;
      await res.body?.cancel();
      return undefined;
    }, 60_000, 250);
    const streamed = await stream.text(); // the gateway ends the stream after its `end` frame
    expect(streamed).toContain('event: end');
    const frames = streamed.split('\n\n').filter((frame) => /^id: \d+$/m.test(frame)).length;
    await platform.waitForStatus(org, runId, 'done');
    const [{ last_seq: lastSeq }] = await platform.query<{ last_seq: number }>('SELECT last_seq FROM runs WHERE org = $1 AND run_id = $2', [org, runId]);
    expect(frames).toBe(lastSeq);

    const after = await waitFor('the orchestrator counters', async () => {
      const s = await scrape('orchestrator');
      return total(s, 'agentrun_commands_total') - total(before.orchestrator, 'agentrun_commands_total') >= 3 && total(s, 'agentrun_dlq_total') >= 1 && s;
    });
    expect(accepted(after) - accepted(before.orchestrator)).toBe(1);
    expect(total(after, 'agentrun_commands_total', { type: 'agent.start', outcome: 'duplicate', reason: '' })).toBe(1);
    // An unknown type is labelled `unknown`, not by what the sender wrote.
    expect(total(after, 'agentrun_commands_total', { type: 'unknown', outcome: 'rejected', reason: 'unknown_type' })).toBe(1);
    expect(after.filter((s) => s.name === 'agentrun_commands_total').map((s) => s.labels.type)).not.toContain('agent.teleport');
    expect(total(after, 'agentrun_dlq_total', { topic: platform.topic(TOPICS.commandsDlq), reason: 'not_json' })).toBe(1);
    // The run was started eagerly: the orchestrator runs the workflow worker too, so the first task went
    // straight to it (AGENTRUN_EAGER_WORKFLOW_START), not through the server's matching.
    const starts = (s: Sample[], eager: string) => total(s, 'agentrun_workflow_starts_total', { eager });
    expect([starts(after, 'true') - starts(before.orchestrator, 'true'), starts(after, 'false') - starts(before.orchestrator, 'false')]).toEqual([1, 0]);

    // Events projected equal the distinct events published for the run.
    const published = await waitFor('the run events on the topic', () => {
      const seqs = new Set(runEvents.filter((r) => r.value.run_id === runId).map((r) => r.value.seq));
      return seqs.size === lastSeq && seqs.size;
    });
    const projected = await waitFor('the projector counter', async () => {
      const d = total(await scrape('projector'), 'agentrun_projector_events_total') - total(before.projector, 'agentrun_projector_events_total');
      return d >= published && d;
    });
    expect(projected).toBe(published);
    const projector = await scrape('projector');
    expect(total(projector, 'agentrun_projector_batch_duration_seconds_count')).toBeGreaterThan(total(before.projector, 'agentrun_projector_batch_duration_seconds_count'));

    // One agentrun_event_visible_seconds observation per frame this test read (the only stream).
    const gateway = await scrape('gateway');
    expect(total(gateway, 'agentrun_event_visible_seconds_count') - total(before.gateway, 'agentrun_event_visible_seconds_count')).toBe(frames);
    expect(total(gateway, 'agentrun_http_requests_total', { route: '/runs/:id/events', method: 'GET', status: '200' })).toBeGreaterThanOrEqual(1);
    const gatewayText = (await scrapeText('gateway')).text;
    for (const secret of [runId, `org="${org}"`]) expect(gatewayText).not.toContain(secret);
    expect(total(gateway, 'agentrun_sse_streams')).toBe(0);

    // The llm policy called the model: tokens in and out, wherever the calls ran.
    const models = [...(await scrape('orchestrator')), ...(await scrape('gpu-worker'))];
    expect(total(models, 'agentrun_model_tokens_total', { direction: 'input' })).toBeGreaterThan(0);
    expect(total(models, 'agentrun_model_tokens_total', { direction: 'output' })).toBeGreaterThan(0);
    expect(total(models, 'agentrun_model_call_duration_seconds_count', { outcome: 'ok' })).toBeGreaterThanOrEqual(2);

    // The SDK's own worker metrics moved with the run: its activities (model calls, CPU tools) and workflow tasks waited in their queues.
    await waitFor('the SDK schedule-to-start latencies on the orchestrator', async () => {
      const s = await scrape('orchestrator');
      return total(s, 'temporal_activity_schedule_to_start_latency_count') > 0 && total(s, 'temporal_workflow_task_schedule_to_start_latency_count') > 0;
    }, 30_000, 250);

    // Both consumer groups catch up: every partition's lag reported, all 0.
    for (const [app, group] of [
      ['orchestrator', platform.topic('agentrun-orchestrator-commands')],
      ['projector', platform.topic('agentrun-projector')],
    ] as const) {
      const lags = await waitFor(`${app}'s lag to return to 0`, async () => {
        const s = (await scrape(app)).filter((x) => x.name === 'agentrun_kafka_consumer_lag' && x.labels.group === group);
        return s.length === 3 && s.every((x) => x.value === 0) && s;
      }, 60_000, 500);
      expect(lags.map((l) => l.labels.partition).sort()).toEqual(['0', '1', '2']);
    }
  });

  it('reports active runs by kind and status from the read model', async () => {
    const runId = uniqueId('paused');
    await platform.publishCommand({ command_id: uniqueId('c'), type: 'agent.start', org, run_id: runId, payload: { goal: 'a long one', max_steps: 400 } });
    await platform.waitForStatus(org, runId, 'running');
    await platform.publishCommand({ command_id: uniqueId('c'), type: 'agent.pause', org, run_id: runId, payload: {} });
    await platform.waitForStatus(org, runId, 'paused');
    const active = async (labels: Record<string, string>) => total(await scrape('projector'), 'agentrun_runs_active', labels);
    await waitFor('the paused run in agentrun_runs_active', async () => (await active({ kind: 'agent', status: 'paused' })) === 1, 30_000, 250);
    // The run stays paused until it is cancelled: the gauge holds there.
    expect(await active({ kind: 'agent', status: 'paused' })).toBe(1);
    await platform.publishCommand({ command_id: uniqueId('c'), type: 'agent.cancel', org, run_id: runId, payload: {} });
    await platform.waitForStatus(org, runId, 'cancelled');
    await waitFor('the cancelled run to leave agentrun_runs_active', async () => (await active({ kind: 'agent' })) === 0, 30_000, 250);
    expect(await active({ kind: 'agent' })).toBe(0);
  });

  it('a stalled projector shows its lag growing while it is stalled, and 0 once it has caught up', async () => {
    const group = platform.topic('agentrun-projector');
    const lagOf = async () => total((await scrape('projector')).filter((x) => x.labels.group === group), 'agentrun_kafka_consumer_lag');
    await waitFor('the projector to be caught up', async () => (await lagOf()) === 0, 60_000, 250);
    // The projector stalls on a lock: alive, consuming nothing, its batch waiting on Postgres.
    const blocker = new PgClient({ connectionString: stackUrls().databaseUrl(platform.database) });
    await blocker.connect();
    try {
      await blocker.query('BEGIN');
      await blocker.query('LOCK TABLE run_events IN ACCESS EXCLUSIVE MODE');
      const runId = uniqueId('stalled');
      await platform.publishCommand({ command_id: uniqueId('c'), type: 'agent.start', org, run_id: runId, payload: { goal: 'count the files', max_steps: 3 } });
      const stalled = await waitFor('the stalled projector to report its lag', async () => {
        const lag = await lagOf();
        return lag >= 3 && lag;
      }, 60_000, 250);
      expect(stalled).toBeGreaterThanOrEqual(3);
      await blocker.query('ROLLBACK');
      await platform.waitForStatus(org, runId, 'done');
    } finally {
      await blocker.end().catch(() => undefined);
    }
    await waitFor('the projector lag back to 0', async () => (await lagOf()) === 0, 60_000, 250);
  });

  it('a scrape is cheap: the time of 20 scrapes of each app', async () => {
    const times: Record<string, number> = {};
    for (const app of APPS) {
      const ms: number[] = [];
      for (let i = 0; i < 20; i++) ms.push((await scrapeText(app)).ms);
      ms.sort((a, b) => a - b);
      times[app] = Math.round(ms[10] * 10) / 10;
    }
    // Printed for the record (median ms per scrape); bounded loosely so a broken scrape path shows.
    console.log(`median scrape time (ms): ${JSON.stringify(times)}`);
    for (const app of APPS) expect(times[app]).toBeLessThan(2_000);
  });
});
