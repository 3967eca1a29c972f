/**
 * What the metrics cost, in process (no stack): the per-event observations the hot paths make (a
 * histogram observation per SSE frame, a counter per projected batch, the labelled pair per HTTP
 * request, one model call's pair) and a scrape of a registry holding every family of the issue with
 * prom-client's default process metrics. Printed as ns per operation and ms per scrape (p50, p99),
 * beside a baseline measured in the same run: the serialisation an SSE frame of a typical event already
 * costs (`JSON.stringify` of a 500-byte run event), so each observation reads as a share of that.
 *
 *   npm run bench:metrics
 */
import { performance } from 'node:perf_hooks';
import { AgentRunMetrics } from '@agentrun/telemetry';

const N = 500_000;

function nsPer(n: number, work: (i: number) => void): number {
  for (let i = 0; i < 10_000; i++) work(i); // warm up
  const started = performance.now();
  for (let i = 0; i < n; i++) work(i);
  return Math.round(((performance.now() - started) * 1e6) / n);
}

async function main(): Promise<void> {
  const m = new AgentRunMetrics({ defaultMetrics: true });
  m.commands();
  m.dlq();
  m.kafkaConsumerLag('agentrun-projector', async () => [0, 1, 2].map((partition) => ({ topic: 'agentrun.run-events.v1', partition, lag: 0 })));
  m.runsActive(async () => [{ kind: 'agent', status: 'running', count: 3 }]);
  m.sseStreams(() => 12);
  const visible = m.eventVisible();
  const events = m.projectorEvents();
  const http = m.http();
  const ts = new Date().toISOString();
  const event = { run_id: 'agent-0123456789', org: 'bench', seq: 42, ts, type: 'tool_called', payload: { tool: 'shell', args: { cmd: 'ls -la /workspace/src && cat README.md' }, step: 7, call_id: 'c-0123456789abcdef', note: 'x'.repeat(300) } };
  const results = {
    baseline_sse_frame_json_ns: nsPer(N / 5, () => JSON.stringify(event)),
    sse_frame_observation_ns: nsPer(N, () => visible.observe(Math.max(0, (Date.now() - Date.parse(ts)) / 1000))),
    projector_batch_count_ns: nsPer(N, () => events.inc(100)),
    http_request_pair_ns: nsPer(N / 5, (i) => {
      const labels = { route: i % 2 ? '/runs/:id' : '/runs/:id/events', method: 'GET', status: '200' };
      http.requests.inc(labels);
      http.duration.observe(labels, 0.012);
    }),
    model_call_ns: nsPer(N / 5, () => m.observeModelCall({ model: 'scripted', seconds: 0.2, outcome: 'ok', inputTokens: 120, outputTokens: 30 })),
  };
  for (let i = 0; i < 20; i++) await m.exposition();
  const scrapes: number[] = [];
  for (let i = 0; i < 200; i++) {
    const started = performance.now();
    await m.exposition();
    scrapes.push(performance.now() - started);
  }
  scrapes.sort((a, b) => a - b);
  const text = await m.exposition();
  const share = (ns: number) => `${((100 * ns) / results.baseline_sse_frame_json_ns).toFixed(1)}%`;
  console.log(`per SSE frame: serialising the event ${results.baseline_sse_frame_json_ns} ns (baseline), the visibility observation ${results.sse_frame_observation_ns} ns (${share(results.sse_frame_observation_ns)} of it)`);
  console.log(JSON.stringify({ ...results, scrape_ms_p50: +scrapes[100].toFixed(2), scrape_ms_p99: +scrapes[197].toFixed(2), scrape_bytes: text.length }));
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
