/**
 * The operators' kit against the metric names issue 17 promises (outside dashboards and alerts depend on
 * them): every PromQL expression of the Grafana dashboard (deploy/grafana/agentrun.json) and of the alert
 * rules (deploy/prometheus/rules.yml) names only those metrics, the Temporal SDK's own worker metrics and
 * `up`; the dashboard shows each of the issue's metrics; every alert the issue asks for is there with a
 * duration, a severity and its texts; the Kubernetes PrometheusRule holds exactly the rules of rules.yml.
 * (promtool checks and unit-tests the rules themselves: the `rules` tier, deploy/prometheus/check.sh.)
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';

const REPO_ROOT = join(__dirname, '../..');
const read = (path: string): string => readFileSync(join(REPO_ROOT, path), 'utf8');

/** Issue 17's names, each with its Prometheus type. */
const AGENTRUN_METRICS: Record<string, 'counter' | 'gauge' | 'histogram'> = {
  agentrun_commands_total: 'counter',
  agentrun_dlq_total: 'counter',
  agentrun_kafka_consumer_lag: 'gauge',
  agentrun_projector_events_total: 'counter',
  agentrun_projector_batch_duration_seconds: 'histogram',
  agentrun_event_visible_seconds: 'histogram',
  agentrun_sse_streams: 'gauge',
  agentrun_http_requests_total: 'counter',
  agentrun_http_request_duration_seconds: 'histogram',
  agentrun_runs_active: 'gauge',
  agentrun_model_tokens_total: 'counter',
  agentrun_model_call_duration_seconds: 'histogram',
};
/**
 * The Temporal SDK's worker metrics the kit reads, as its core Prometheus exporter names them with
 * durations in seconds (libs/runtime's Temporal runtime): no unit suffix, no `_total` on counters.
 */
const TEMPORAL_METRICS: Record<string, 'counter' | 'gauge' | 'histogram'> = {
  temporal_worker_task_slots_available: 'gauge',
  temporal_worker_task_slots_used: 'gauge',
  temporal_activity_schedule_to_start_latency: 'histogram',
  temporal_workflow_task_schedule_to_start_latency: 'histogram',
  temporal_activity_execution_failed: 'counter',
};

function seriesNames(families: Record<string, string>): Map<string, string> {
  const names = new Map<string, string>();
  for (const [family, type] of Object.entries(families)) {
    if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.set(family + suffix, family);
    else names.set(family, family);
  }
  return names;
}
/**
 * Ours beyond the issue's list: a service's readiness (the not-ready alert), streams failing after they
 * opened, and the workflow workers' run-event publishing (published, and failed attempts).
 */
const EXTRA_METRICS: Record<string, 'gauge' | 'counter'> = {
  agentrun_ready: 'gauge',
  agentrun_readiness_check: 'gauge',
  agentrun_sse_errors_total: 'counter',
  agentrun_run_events_published_total: 'counter',
  agentrun_run_event_publish_failures_total: 'counter',
};
const ALLOWED = new Map([...seriesNames(AGENTRUN_METRICS), ...seriesNames(EXTRA_METRICS), ...seriesNames(TEMPORAL_METRICS), ['up', 'up']]);

const KEYWORDS = new Set(['and', 'or', 'unless', 'bool', 'offset', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'inf', 'nan']);

/** The metric names a PromQL expression reads: identifiers that are not functions, keywords, labels or durations. */
function metricNames(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names: string[] = [];
  for (const m of stripped.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const word = m[0];
    const after = stripped.slice((m.index ?? 0) + word.length);
    if (/^\s*\(/.test(after)) continue; // a function or an aggregation
    if (KEYWORDS.has(word.toLowerCase())) continue;
    const before = stripped.slice(0, m.index);
    if (/[0-9.]$/.test(before)) continue; // the exponent or unit of a number
    names.push(word);
  }
  return names;
}

interface Panel {
  type: string;
  title: string;
  id: number;
  datasource?: { type: string; uid: string };
  targets?: { expr: string; refId: string }[];
  gridPos: { x: number; y: number; w: number; h: number };
}
interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

const dashboard = JSON.parse(read('deploy/grafana/agentrun.json')) as { uid: string; title: string; panels: Panel[]; templating: { list: { name: string; type: string; query: string }[] } };
const rules = parse(read('deploy/prometheus/rules.yml')) as { groups: { name: string; rules: Rule[] }[] };
const alerts = rules.groups.flatMap((g) => g.rules);

describe('metricNames (the check below)', () => {
  it('reads metric names and nothing else out of PromQL', () => {
    expect(metricNames('histogram_quantile(0.95, sum by (route, le) (rate(agentrun_http_request_duration_seconds_bucket{route!="/runs/:id/events"}[$__rate_interval])))')).toEqual([
      'agentrun_http_request_duration_seconds_bucket',
    ]);
    expect(metricNames('sum by (group, topic) (agentrun_kafka_consumer_lag{group=~"(.*\\\\.)?x"}) > 0 and on () sum(rate(agentrun_projector_events_total[5m])) == 0')).toEqual([
      'agentrun_kafka_consumer_lag',
      'agentrun_projector_events_total',
    ]);
    expect(metricNames('up{job="agentrun"} == 0 or vector(1e3) > bogus_metric offset 5m')).toEqual(['up', 'bogus_metric']);
  });
});

describe('the Grafana dashboard (deploy/grafana/agentrun.json)', () => {
  const queryPanels = dashboard.panels.filter((p) => p.type !== 'row');
  const exprs = queryPanels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));

  it('queries only the issue\'s metric names, the Temporal SDK\'s worker metrics and up', () => {
    expect(exprs.length).toBeGreaterThan(20);
    const unknown = exprs.flatMap(({ panel, expr }) => metricNames(expr).filter((n) => !ALLOWED.has(n)).map((n) => `${panel}: ${n}`));
    expect(unknown).toEqual([]);
    for (const { panel, expr } of exprs) expect([panel, metricNames(expr).length]).not.toEqual([panel, 0]);
  });

  it('shows every metric of the issue, and the Temporal slots and schedule-to-start latencies', () => {
    const used = new Set(exprs.flatMap(({ expr }) => metricNames(expr)).map((n) => ALLOWED.get(n)));
    for (const family of [...Object.keys(AGENTRUN_METRICS), ...Object.keys(TEMPORAL_METRICS)]) expect([family, used.has(family)]).toEqual([family, true]);
  });

  it('reads from a Prometheus data source chosen on import, with unique panel ids and no overlapping panels', () => {
    expect(dashboard.uid).toBe('agentrun');
    expect(dashboard.templating.list).toContainEqual(expect.objectContaining({ name: 'datasource', type: 'datasource', query: 'prometheus' }));
    for (const p of queryPanels) expect([p.title, p.datasource]).toEqual([p.title, { type: 'prometheus', uid: '${datasource}' }]);
    const ids = dashboard.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    const overlaps = (a: Panel['gridPos'], b: Panel['gridPos']): boolean => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
    const clashes = dashboard.panels.flatMap((a, i) => dashboard.panels.slice(i + 1).filter((b) => overlaps(a.gridPos, b.gridPos)).map((b) => `${a.title} / ${b.title}`));
    expect(clashes).toEqual([]);
    for (const p of dashboard.panels) expect(p.gridPos.x + p.gridPos.w).toBeLessThanOrEqual(24);
  });
});

describe('the alert rules (deploy/prometheus/rules.yml)', () => {
  it('name only the issue\'s metric names, the Temporal SDK\'s worker metrics and up', () => {
    const unknown = alerts.flatMap((r) => metricNames(r.expr).filter((n) => !ALLOWED.has(n)).map((n) => `${r.alert}: ${n}`));
    expect(unknown).toEqual([]);
  });

  it('has the alerts the issue asks for: lag growing, DLQ growing, projector stalled, lane stalled / schedule-to-start high, SSE errors, a service down', () => {
    expect(alerts.map((r) => r.alert)).toEqual(
      expect.arrayContaining([
        'AgentRunConsumerLagGrowing',
        'AgentRunDLQGrowing',
        'AgentRunProjectorStalled',
        'AgentRunLaneStalled',
        'AgentRunLaneScheduleToStartHigh',
        'AgentRunWorkflowTaskScheduleToStartHigh',
        'AgentRunSSEErrors',
        'AgentRunServiceDown',
        'AgentRunServiceNotReady',
      ]),
    );
    expect(new Set(alerts.map((r) => r.alert)).size).toBe(alerts.length);
  });

  it('gives every alert a duration, a severity, a summary and a description', () => {
    for (const r of alerts) {
      expect([r.alert, r.for]).toEqual([r.alert, expect.stringMatching(/^\d+[smh]$/)]);
      expect([r.alert, r.labels?.severity]).toEqual([r.alert, expect.stringMatching(/^(warning|critical)$/)]);
      expect([r.alert, typeof r.annotations?.summary, typeof r.annotations?.description]).toEqual([r.alert, 'string', 'string']);
    }
  });

  it('are the Kubernetes PrometheusRule\'s groups exactly (node deploy/prometheus/prometheus-rule.mjs writes it)', () => {
    const rule = parse(read('deploy/k8s/base/prometheus-rule.yaml')) as { kind: string; spec: { groups: unknown } };
    expect(rule.kind).toBe('PrometheusRule');
    expect(rule.spec.groups).toEqual(rules.groups);
  });
});
