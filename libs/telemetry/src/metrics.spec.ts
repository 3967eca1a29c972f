import { AgentRunMetrics, BoundedLabel, CachedReading, mergeExposition, partitionLag, PROMETHEUS_CONTENT_TYPE, processMetrics } from './metrics';

/** The family names an exposition declares, from its `# TYPE` lines. */
function families(text: string): string[] {
  return [...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => `${m[1]} ${m[2]}`).sort();
}

/** The value of one sample line, by its exact name and labels as printed. */
function sample(text: string, line: string): number | undefined {
  const found = text.split('\n').find((l) => l.startsWith(`${line} `));
  return found === undefined ? undefined : Number(found.slice(line.length + 1));
}

describe('AgentRunMetrics', () => {
  it('exports exactly the metrics a process asked for, under the names the issue gives', async () => {
    const empty = new AgentRunMetrics();
    expect((await empty.registry.metrics()).trim()).toBe('');

    const gateway = new AgentRunMetrics();
    gateway.eventVisible();
    gateway.sseStreams(() => 3);
    gateway.http();
    expect(families(await gateway.registry.metrics())).toEqual([
      'agentrun_event_visible_seconds histogram',
      'agentrun_http_request_duration_seconds histogram',
      'agentrun_http_requests_total counter',
      'agentrun_sse_streams gauge',
    ]);
    // No projector counter stuck at 0 on the gateway.
    expect(await gateway.registry.metrics()).not.toContain('agentrun_projector');

    const all = new AgentRunMetrics();
    all.commands();
    all.dlq();
    all.kafkaConsumerLag('g', async () => []);
    all.projectorEvents();
    all.projectorBatchDuration();
    all.eventVisible();
    all.sseStreams(() => 0);
    all.http();
    all.runsActive(async () => []);
    all.model();
    expect(families(await all.registry.metrics())).toEqual([
      'agentrun_commands_total counter',
      'agentrun_dlq_total counter',
      'agentrun_event_visible_seconds histogram',
      'agentrun_http_request_duration_seconds histogram',
      'agentrun_http_requests_total counter',
      'agentrun_kafka_consumer_lag gauge',
      'agentrun_model_call_duration_seconds histogram',
      'agentrun_model_tokens_total counter',
      'agentrun_projector_batch_duration_seconds histogram',
      'agentrun_projector_events_total counter',
      'agentrun_runs_active gauge',
      'agentrun_sse_streams gauge',
    ]);
  });

  it('counts with the labels given and reads gauges at scrape time', async () => {
    const m = new AgentRunMetrics();
    m.commands().inc({ type: 'agent.start', outcome: 'accepted', reason: '' });
    m.commands().inc({ type: 'agent.start', outcome: 'accepted', reason: '' });
    m.commands().inc({ type: 'unknown', outcome: 'rejected', reason: 'unknown_type' });
    m.dlq().inc({ topic: 'agentrun.commands.dlq.v1', reason: 'not_json' });
    let open = 2;
    m.sseStreams(() => open);
    m.runsActive(async () => [{ kind: 'agent', status: 'running', count: 4 }]);
    m.eventVisible().observe(0.02);
    m.eventVisible().observe(0.3);
    m.sseErrors().inc();

    let text = await m.registry.metrics();
    expect(sample(text, 'agentrun_commands_total{type="agent.start",outcome="accepted",reason=""}')).toBe(2);
    expect(sample(text, 'agentrun_commands_total{type="unknown",outcome="rejected",reason="unknown_type"}')).toBe(1);
    expect(sample(text, 'agentrun_dlq_total{topic="agentrun.commands.dlq.v1",reason="not_json"}')).toBe(1);
    expect(sample(text, 'agentrun_sse_streams')).toBe(2);
    expect(sample(text, 'agentrun_runs_active{kind="agent",status="running"}')).toBe(4);
    expect(sample(text, 'agentrun_event_visible_seconds_count')).toBe(2);
    expect(sample(text, 'agentrun_sse_errors_total')).toBe(1);
    expect(sample(text, 'agentrun_event_visible_seconds_bucket{le="0.025"}')).toBe(1);

    open = 0;
    text = await m.registry.metrics();
    expect(sample(text, 'agentrun_sse_streams')).toBe(0);
  });

  it('reports readiness as a whole and per check at scrape time, and not ready before a first report', async () => {
    const m = new AgentRunMetrics();
    let report: { ready: boolean; checks: Record<string, string> } | Error = new Error('not started');
    m.readiness(async () => {
      if (report instanceof Error) throw report;
      return report;
    });
    let text = await m.registry.metrics();
    expect(sample(text, 'agentrun_ready')).toBe(0);

    report = { ready: true, checks: { postgres: 'ok', kafka: 'ok' } };
    text = await m.registry.metrics();
    expect(sample(text, 'agentrun_ready')).toBe(1);
    expect(sample(text, 'agentrun_readiness_check{check="kafka"}')).toBe(1);

    report = { ready: false, checks: { postgres: 'ok', kafka: 'failed' } };
    text = await m.registry.metrics();
    expect(sample(text, 'agentrun_ready')).toBe(0);
    expect(sample(text, 'agentrun_readiness_check{check="kafka"}')).toBe(0);
    expect(sample(text, 'agentrun_readiness_check{check="postgres"}')).toBe(1);
  });

  it('labels model calls by a bounded model name and counts input and output tokens', async () => {
    const m = new AgentRunMetrics();
    m.observeModelCall({ model: 'gpt-x', seconds: 0.4, outcome: 'ok', inputTokens: 10, outputTokens: 3 });
    m.observeModelCall({ model: 'gpt-x', seconds: 0.1, outcome: 'timeout' });
    for (let i = 0; i < 40; i++) m.observeModelCall({ model: `m-${i}`, seconds: 0.01, outcome: 'ok', inputTokens: 1 });
    const text = await m.registry.metrics();
    expect(sample(text, 'agentrun_model_tokens_total{model="gpt-x",direction="input"}')).toBe(10);
    expect(sample(text, 'agentrun_model_tokens_total{model="gpt-x",direction="output"}')).toBe(3);
    expect(sample(text, 'agentrun_model_call_duration_seconds_count{model="gpt-x",outcome="timeout"}')).toBe(1);
    const models = new Set([...text.matchAll(/agentrun_model_tokens_total\{model="([^"]*)"/g)].map((x) => x[1]));
    // gpt-x and 19 more by name, the rest as "other": 21 values at most.
    expect(models.size).toBe(21);
    expect(models.has('other')).toBe(true);
    expect(sample(text, 'agentrun_model_tokens_total{model="other",direction="input"}')).toBe(21);
  });

  it('reports consumer lag per group, topic and partition from the reading, and keeps the last one when a read fails', async () => {
    const m = new AgentRunMetrics();
    let fail = false;
    let lag = 7;
    m.kafkaConsumerLag('agentrun-projector', async () => {
      if (fail) throw new Error('broker down');
      return [
        { topic: 'agentrun.run-events.v1', partition: 0, lag },
        { topic: 'agentrun.run-events.v1', partition: 1, lag: 0 },
      ];
    });
    let text = await m.registry.metrics();
    expect(sample(text, 'agentrun_kafka_consumer_lag{group="agentrun-projector",topic="agentrun.run-events.v1",partition="0"}')).toBe(7);
    expect(sample(text, 'agentrun_kafka_consumer_lag{group="agentrun-projector",topic="agentrun.run-events.v1",partition="1"}')).toBe(0);
    lag = 9;
    fail = true;
    text = await m.registry.metrics();
    expect(sample(text, 'agentrun_kafka_consumer_lag{group="agentrun-projector",topic="agentrun.run-events.v1",partition="0"}')).toBe(7);
    fail = false;
    text = await m.registry.metrics();
    expect(sample(text, 'agentrun_kafka_consumer_lag{group="agentrun-projector",topic="agentrun.run-events.v1",partition="0"}')).toBe(9);
  });

  it('serves its own metrics and appends the Temporal exporter text, or only its own when the exporter does not answer', async () => {
    const m = new AgentRunMetrics();
    m.projectorEvents().inc(5);
    expect(await m.exposition(async () => 'never asked')).not.toContain('never asked');
    m.setTemporalEndpoint('http://127.0.0.1:1/metrics');
    const temporal = '# HELP temporal_worker_task_slots_available x\n# TYPE temporal_worker_task_slots_available gauge\ntemporal_worker_task_slots_available{worker_type="ActivityWorker"} 100\n';
    const merged = await m.exposition(async (url) => {
      expect(url).toBe('http://127.0.0.1:1/metrics');
      return temporal;
    });
    expect(sample(merged, 'agentrun_projector_events_total')).toBe(5);
    expect(sample(merged, 'temporal_worker_task_slots_available{worker_type="ActivityWorker"}')).toBe(100);
    const down = await m.exposition(async () => {
      throw new Error('ECONNREFUSED');
    });
    expect(down).toBe(await m.registry.metrics());
    expect(PROMETHEUS_CONTENT_TYPE).toBe('text/plain; version=0.0.4; charset=utf-8');
  });

  it('the process-wide registry has the default process metrics under their standard names', async () => {
    const text = await processMetrics().registry.metrics();
    expect(text).toContain('# TYPE process_cpu_user_seconds_total counter');
    expect(text).toContain('# TYPE nodejs_eventloop_lag_seconds gauge');
    expect(processMetrics()).toBe(processMetrics());
  });
});

describe('mergeExposition', () => {
  const ours = '# HELP process_cpu_seconds_total ours\n# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1\n';

  it('leaves out a family of theirs whose name ours has, keeps the rest whole', () => {
    const theirs = [
      '# HELP process_cpu_seconds_total theirs',
      '# TYPE process_cpu_seconds_total counter',
      'process_cpu_seconds_total 99',
      '# HELP temporal_activity_schedule_to_start_latency x',
      '# TYPE temporal_activity_schedule_to_start_latency histogram',
      'temporal_activity_schedule_to_start_latency_bucket{le="0.1"} 2',
      'temporal_activity_schedule_to_start_latency_bucket{le="+Inf"} 3',
      'temporal_activity_schedule_to_start_latency_sum 0.4',
      'temporal_activity_schedule_to_start_latency_count 3',
      '',
    ].join('\n');
    const merged = mergeExposition(ours, theirs);
    expect(merged.match(/^# TYPE process_cpu_seconds_total/gm)).toHaveLength(1);
    expect(merged).not.toContain('process_cpu_seconds_total 99');
    expect(merged).toContain('temporal_activity_schedule_to_start_latency_bucket{le="+Inf"} 3');
    expect(merged).toContain('temporal_activity_schedule_to_start_latency_count 3');
    expect(merged.endsWith('\n')).toBe(true);
  });

  it('leaves out a histogram sample of theirs that collides with one of our histogram families', () => {
    const hist = '# TYPE agentrun_x_seconds histogram\nagentrun_x_seconds_count 1\n';
    expect(mergeExposition(hist, 'agentrun_x_seconds_count 5\nother_total 2\n')).toBe(`${hist}other_total 2\n`);
  });

  it('is ours alone when theirs is empty', () => {
    expect(mergeExposition(ours, '')).toBe(ours);
    expect(mergeExposition('', 'a 1\n')).toBe('a 1\n');
  });
});

describe('partitionLag', () => {
  it('is the high watermark minus the committed offset, 0 when caught up, never negative', () => {
    expect(partitionLag('120', '100')).toBe(20);
    expect(partitionLag('120', '120')).toBe(0);
    expect(partitionLag('120', '130')).toBe(0);
  });

  it('counts from the log start when the group has committed nothing (-1)', () => {
    expect(partitionLag('120', '-1', '20')).toBe(100);
    expect(partitionLag('0', '-1', '0')).toBe(0);
  });
});

describe('BoundedLabel', () => {
  it('keeps the known values, the first new ones up to the limit, and maps the rest (and empty or huge values) to the overflow', () => {
    const label = new BoundedLabel(2, ['agent.start'], 'unknown');
    expect(label.of('agent.start')).toBe('agent.start');
    expect(label.of('a')).toBe('a');
    expect(label.of('b')).toBe('b');
    expect(label.of('c')).toBe('unknown');
    expect(label.of('a')).toBe('a');
    expect(label.of('')).toBe('unknown');
    expect(label.of(undefined)).toBe('unknown');
    expect(label.of('x'.repeat(500))).toBe('unknown');
    const closed = new BoundedLabel(0, ['agent.start'], 'unknown');
    expect(closed.of('agent.pause')).toBe('unknown');
  });
});

describe('CachedReading', () => {
  it('gives the last good value when a read is late, without starting a second read meanwhile', async () => {
    let calls = 0;
    let release: (v: number) => void = () => undefined;
    const reading = new CachedReading<number>(() => {
      calls++;
      if (calls === 1) return Promise.resolve(1);
      return new Promise<number>((resolve) => (release = resolve));
    }, 20);
    expect(await reading.get()).toBe(1);
    expect(await reading.get()).toBe(1); // late: the cached value
    expect(await reading.get()).toBe(1); // the same slow read, not a new one
    expect(calls).toBe(2);
    release(2);
    await new Promise((r) => setImmediate(r));
    // A new read (the third), late again: the value the second one delivered.
    expect(await reading.get()).toBe(2);
    expect(calls).toBe(3);
  });
});
