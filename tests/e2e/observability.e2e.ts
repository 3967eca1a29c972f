/**
 * Issue 17's metrics through a real Prometheus: Debian's server (unpacked into .stack/opt/prometheus by
 * `bash deploy/local/stack.sh install prometheus`, as the observability profile does) scrapes this test
 * platform's apps every second with deploy/prometheus/rules.yml loaded. After a few runs started over
 * Kafka, PromQL over Prometheus' HTTP API (/api/v1/query) tells what happened: decisions by type and
 * outcome equal to the command-results topic, lag back to 0 for the command consumer and the projector,
 * events projected equal to events published, one event-visible observation per SSE frame the test read,
 * route templates (never a run id or an org) in labels, the Temporal SDK's worker metrics in the same
 * scrape under the names the alert rules use, every alert rule evaluating without error (none pending),
 * and a stopped app raising AgentRunServiceDown with its name.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { TOPICS, type CommandOutcome, type RunEventEnvelope } from '@agentrun/contracts';
import { freePort, Platform, uniqueId, type TopicRecord } from '../support/platform';
import { REPO_ROOT } from '../support/stack-env';
import { SseClient } from '../support/sse';
import { waitFor } from '../support/wait';

const PROMETHEUS_HOME = join(REPO_ROOT, '.stack/opt/prometheus');
const PROMETHEUS_BIN = join(PROMETHEUS_HOME, 'usr/bin/prometheus');

interface Sample {
  metric: Record<string, string>;
  value: [number, string];
}

/** One Prometheus server of the test's own: its config names only this platform's ports. */
class PrometheusServer {
  private child?: ChildProcess;
  port = 0;

  constructor(private readonly dir: string) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async start(targets: { port: number; component: string }[]): Promise<void> {
    if (!existsSync(PROMETHEUS_BIN)) {
      // As the observability profile installs it: Debian's package unpacked, nothing started.
      execFileSync('bash', [join(REPO_ROOT, 'deploy/local/stack.sh'), 'install', 'prometheus'], { stdio: 'ignore', timeout: 300_000 });
    }
    mkdirSync(join(this.dir, 'data'), { recursive: true });
    const config = {
      global: { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' },
      rule_files: [join(REPO_ROOT, 'deploy/prometheus/rules.yml')],
      scrape_configs: [
        {
          job_name: 'agentrun',
          static_configs: targets.map((t) => ({ targets: [`127.0.0.1:${t.port}`], labels: { component: t.component } })),
        },
      ],
    };
    // JSON is YAML.
    writeFileSync(join(this.dir, 'prometheus.yml'), JSON.stringify(config, null, 2));
    this.port = await freePort();
    const child = spawn(
      PROMETHEUS_BIN,
      [
        `--config.file=${join(this.dir, 'prometheus.yml')}`,
        `--storage.tsdb.path=${join(this.dir, 'data')}`,
        `--web.listen-address=127.0.0.1:${this.port}`,
        `--web.local-assets=${join(PROMETHEUS_HOME, 'usr/share/prometheus/web')}`,
        '--log.level=warn',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString('utf8')).slice(-4000)));
    this.child = child;
    await waitFor('Prometheus to be ready', async () => {
      if (child.exitCode !== null) throw new Error(`prometheus exited with ${child.exitCode}: ${stderr}`);
      const res = await fetch(`${this.url}/-/ready`);
      return res.ok;
    }, 30_000, 200);
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }

  /** An instant query: its samples (a vector), or a scalar's one value as a sample without labels. */
  async query(promql: string): Promise<Sample[]> {
    const res = await fetch(`${this.url}/api/v1/query?query=${encodeURIComponent(promql)}`);
    const body = (await res.json()) as { status: string; error?: string; data: { resultType: string; result: Sample[] | [number, string] } };
    if (body.status !== 'success') throw new Error(`${promql}: ${body.error}`);
    if (body.data.resultType === 'scalar') return [{ metric: {}, value: body.data.result as [number, string] }];
    return body.data.result as Sample[];
  }

  /** A query's samples as { "label=value,...": number }, over the labels named. */
  async table(promql: string, labels: string[]): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    for (const s of await this.query(promql)) out[labels.map((l) => s.metric[l] ?? '').join(' ')] = Number(s.value[1]);
    return out;
  }

  /** The one value of a query that aggregates to a single sample (undefined while there is none). */
  async value(promql: string): Promise<number | undefined> {
    const result = await this.query(promql);
    return result.length === 1 ? Number(result[0].value[1]) : undefined;
  }

  async get<T>(path: string): Promise<T> {
    const res = await fetch(this.url + path);
    return ((await res.json()) as { data: T }).data;
  }
}

describe('metrics through a real Prometheus scraping the platform', () => {
  const platform = new Platform();
  const prometheus = new PrometheusServer(join(platform.dataDir, 'prometheus'));
  let outcomes: TopicRecord<CommandOutcome>[];
  let events: TopicRecord<RunEventEnvelope>[];
  const org = `obs${Date.now().toString(36)}`;
  const runIds = [uniqueId('obs-a'), uniqueId('obs-b'), uniqueId('obs-c')];
  let framesRead = 0;

  beforeAll(async () => {
    await platform.start();
    outcomes = await platform.follow<CommandOutcome>(TOPICS.commandResults);
    events = await platform.follow<RunEventEnvelope>(TOPICS.runEvents);
    await prometheus.start(platform.instances().map((instance) => ({ port: platform.ports[instance], component: instance })));

    // Three runs, one command twice (a duplicate), one command for a run that does not exist (rejected).
    const startIds = runIds.map(() => uniqueId('c'));
    for (const [i, runId] of runIds.entries()) {
      await platform.publishCommand({ command_id: startIds[i], type: 'agent.start', org, run_id: runId, payload: { goal: 'look around', max_steps: 4 } });
    }
    await platform.publishCommand({ command_id: startIds[0], type: 'agent.start', org, run_id: runIds[0], payload: { goal: 'look around', max_steps: 4 } });
    await platform.publishCommand({ command_id: uniqueId('c'), type: 'agent.pause', org, run_id: uniqueId('nosuch'), payload: {} });
    for (const runId of runIds) await platform.waitForStatus(org, runId, 'done');
    await waitFor('an outcome for each of the five commands', () => outcomes.filter((o) => o.value.org === org).length === 5);

    // Each run's stream read to its end: every event frame is one observation on the gateway.
    for (const runId of runIds) {
      const sse = new SseClient(`${platform.gatewayUrl}/runs/${runId}/events`, { 'X-Org': org });
      await sse.finished();
      expect(sse.status).toBe(200);
      framesRead += sse.events().length;
    }
  }, 360_000);

  afterAll(async () => {
    await prometheus.stop();
    await platform.stop();
  });

  it('scrapes every app of the platform: each target up', async () => {
    const up = await waitFor('every target scraped and up', async () => {
      const table = await prometheus.table('up{job="agentrun"}', ['component']);
      return Object.keys(table).length === platform.instances().length && Object.values(table).every((v) => v === 1) && table;
    }, 30_000, 250);
    expect(Object.keys(up).sort()).toEqual([...platform.instances()].sort());
  });

  it('counts decisions by type and outcome exactly as the command-results topic has them', async () => {
    const fromTopic: Record<string, number> = {};
    for (const { value } of outcomes.filter((o) => o.value.org === org)) {
      const key = `${value.type} ${value.outcome} ${value.outcome === 'rejected' ? value.reason ?? '' : ''}`.trim();
      fromTopic[key] = (fromTopic[key] ?? 0) + 1;
    }
    expect(fromTopic).toEqual({ 'agent.start accepted': 3, 'agent.start duplicate': 1, 'agent.pause rejected unknown_run': 1 });
    const query = 'sum by (type, outcome, reason) (agentrun_commands_total)';
    // Polled: the last scrape may predate the last decision.
    const counted = await waitFor('the decisions in Prometheus', async () => {
      const table = await prometheus.table(query, ['type', 'outcome', 'reason']);
      const trimmed = Object.fromEntries(Object.entries(table).map(([k, v]) => [k.trim(), v]));
      return sameCounts(trimmed, fromTopic) && trimmed;
    }, 30_000, 250);
    expect(counted).toEqual(fromTopic);
    expect(await prometheus.table('sum by (type) (agentrun_commands_total{outcome="accepted"})', ['type'])).toEqual({ 'agent.start': 3 });
  });

  it('sees the lag of the command consumer and the projector back to 0', async () => {
    const groups = await waitFor('both groups lag 0', async () => {
      const table = await prometheus.table('sum by (group) (agentrun_kafka_consumer_lag)', ['group']);
      return Object.keys(table).length >= 2 && Object.values(table).every((v) => v === 0) && table;
    }, 60_000, 250);
    expect(Object.keys(groups).sort()).toEqual([`${platform.prefix}agentrun-orchestrator-commands`, `${platform.prefix}agentrun-projector`].sort());
    // Per partition of each group's topic: all three partitions, each 0.
    const partitions = await prometheus.table('agentrun_kafka_consumer_lag', ['group', 'topic', 'partition']);
    expect(Object.keys(partitions).length).toBeGreaterThanOrEqual(6);
    expect(Object.values(partitions).every((v) => v === 0)).toBe(true);
  });

  it('counts as many events projected as were published', async () => {
    const published = events.filter((e) => e.value.org === org).length;
    const [{ total }] = await platform.query<{ total: string }>('SELECT sum(last_seq) AS total FROM runs WHERE org = $1', [org]);
    expect(published).toBe(Number(total));
    expect(published).toBeGreaterThan(0);
    await waitFor(`agentrun_projector_events_total = ${published}`, async () => (await prometheus.value('sum(agentrun_projector_events_total)')) === published, 30_000, 250);
    expect(await prometheus.value('sum(agentrun_projector_batch_duration_seconds_count)')).toBeGreaterThan(0);
  });

  it('observes event visibility once per SSE frame written, and no stream is left open', async () => {
    expect(framesRead).toBeGreaterThan(0);
    await waitFor(`agentrun_event_visible_seconds_count = ${framesRead}`, async () => (await prometheus.value('sum(agentrun_event_visible_seconds_count)')) === framesRead, 30_000, 250);
    expect(await prometheus.value('sum(agentrun_event_visible_seconds_sum)')).toBeGreaterThan(0);
    await waitFor('agentrun_sse_streams = 0', async () => (await prometheus.value('sum(agentrun_sse_streams)')) === 0, 30_000, 250);
    // The three streams by their route template, 200 each.
    await waitFor('the streams in agentrun_http_requests_total', async () =>
      (await prometheus.value('sum(agentrun_http_requests_total{route="/runs/:id/events", method="GET", status="200"})')) === runIds.length, 30_000, 250);
  });

  it('labels nothing with a run id or an org', async () => {
    const series = await prometheus.get<Record<string, string>[]>(`/api/v1/series?${new URLSearchParams({ 'match[]': '{__name__=~"agentrun_.+"}' })}`);
    expect(series.length).toBeGreaterThan(10);
    const leaks = series.filter((labels) => Object.values(labels).some((v) => v.includes(org) || runIds.some((id) => v.includes(id))));
    expect(leaks).toEqual([]);
  });

  it("serves the Temporal SDK's worker metrics in the same scrape, under the names the alert rules read", async () => {
    for (const name of ['temporal_worker_task_slots_available', 'temporal_activity_schedule_to_start_latency_bucket', 'temporal_workflow_task_schedule_to_start_latency_bucket']) {
      await waitFor(`${name} scraped`, async () => ((await prometheus.value(`count(${name})`)) ?? 0) > 0, 30_000, 250);
    }
    // Activities ran on this platform's lanes: their task queues carry its prefix.
    const queues = Object.keys(await prometheus.table('sum by (task_queue) (temporal_activity_schedule_to_start_latency_count)', ['task_queue']));
    expect(queues.some((q) => q.startsWith(platform.prefix))).toBe(true);
  });

  it('evaluates every alert rule of deploy/prometheus/rules.yml without error, none firing or pending on a healthy platform', async () => {
    type RuleState = { name: string; health: string; lastError?: string; state: string; lastEvaluation: string };
    const rules = await waitFor('every rule evaluated', async () => {
      const data = await prometheus.get<{ groups: { rules: RuleState[] }[] }>('/api/v1/rules');
      const all = data.groups.flatMap((g) => g.rules);
      return all.length > 0 && all.every((r) => !r.lastEvaluation.startsWith('0001-')) && all;
    }, 30_000, 250);
    expect(rules.filter((r) => r.health !== 'ok').map((r) => `${r.name}: ${r.lastError}`)).toEqual([]);
    // Not even pending: on a platform that just ran three runs cleanly, no alert's condition holds.
    expect(rules.filter((r) => r.state !== 'inactive').map((r) => `${r.name}: ${r.state}`)).toEqual([]);
  });

  it('raises AgentRunServiceDown (pending for its 2 minutes) for an app that stops, naming it', async () => {
    await platform.stopApp('snapshotter');
    type Alert = { labels: Record<string, string>; state: string };
    const alert = await waitFor('AgentRunServiceDown for the snapshotter', async () => {
      const { alerts } = await prometheus.get<{ alerts: Alert[] }>('/api/v1/alerts');
      return alerts.find((a) => a.labels.alertname === 'AgentRunServiceDown');
    }, 30_000, 250);
    expect(alert).toMatchObject({ state: 'pending', labels: { component: 'snapshotter', job: 'agentrun', severity: 'critical' } });
  });
});

function sameCounts(a: Record<string, number>, b: Record<string, number>): boolean {
  return Object.keys(a).length === Object.keys(b).length && Object.entries(b).every(([k, v]) => a[k] === v);
}
