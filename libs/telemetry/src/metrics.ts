import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/*
 * Prometheus metrics. One registry per process (`processMetrics()`), served at `GET /metrics` on the
 * app's health port. Every metric is created the first time the code that emits it asks for it, so a
 * process exports only what it emits: the gateway has no projector counter stuck at 0.
 *
 * Label values are bounded: command types, outcomes, reasons, topics, groups, partitions, route
 * templates, run kinds and statuses, and at most MODEL_LABEL_LIMIT model names. Never a run id or an org.
 */

/** What `GET /metrics` answers with: Prometheus' text format 0.0.4. */
export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** Seconds, from 5 ms to 60 s: event visibility, HTTP requests, projector batches. */
export const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** Seconds, from 50 ms to 10 min: model calls. */
export const MODEL_CALL_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

/** Distinct model names a process labels before it counts the rest as `other`. */
export const MODEL_LABEL_LIMIT = 20;

/** How long a scrape-time read (consumer lag, active runs, the Temporal exporter) may take. */
export const SCRAPE_READ_TIMEOUT_MS = 2_000;

export type LagReading = { topic: string; partition: number; lag: number };
export type ActiveRunsReading = { kind: string; status: string; count: number };

/**
 * A label that keeps at most `limit` distinct values: the known ones always, then the first values
 * seen up to the limit; anything past it (or empty, or too long) is `overflow`.
 */
export class BoundedLabel {
  private readonly seen = new Set<string>();
  private readonly known: ReadonlySet<string>;

  constructor(
    private readonly limit: number,
    known: Iterable<string> = [],
    private readonly overflow = 'other',
  ) {
    this.known = new Set(known);
  }

  of(value: string | undefined | null): string {
    const text = typeof value === 'string' ? value : '';
    if (this.known.has(text)) return text;
    if (!text || text.length > 128) return this.overflow;
    if (this.seen.has(text)) return text;
    if (this.seen.size >= this.limit) return this.overflow;
    this.seen.add(text);
    return text;
  }
}

/**
 * Reads a value at scrape time with a deadline, and gives the last good value when the read fails
 * or is late: a slow broker or database does not hold the scrape, and a stalled consumer still shows
 * its lag. `undefined` until a first read succeeds.
 */
export class CachedReading<T> {
  private last?: T;
  private inFlight?: Promise<void>;

  constructor(
    private readonly read: () => Promise<T>,
    private readonly timeoutMs = SCRAPE_READ_TIMEOUT_MS,
  ) {}

  async get(): Promise<T | undefined> {
    // One read at a time: scrapes that overlap a slow read share it.
    this.inFlight ??= this.read().then(
      (value) => {
        this.last = value;
      },
      () => undefined,
    ).finally(() => {
      this.inFlight = undefined;
    });
    await withDeadline(this.inFlight, this.timeoutMs);
    return this.last;
  }
}

async function withDeadline(work: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([work, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}

/** Consumer lag of one partition: what the group has not committed yet, never below 0. No commit yet counts from the log start. */
export function partitionLag(highWatermark: string | number, committed: string | number, logStart: string | number = 0): number {
  const high = Number(highWatermark);
  let done = Number(committed);
  // -1: the group has no committed offset for the partition; everything still in the log is its lag.
  if (!Number.isFinite(done) || done < 0) done = Number(logStart);
  if (!Number.isFinite(high) || !Number.isFinite(done)) return 0;
  return Math.max(0, high - done);
}

/**
 * The metrics of one process, each created on first use. Tests build their own; the services use
 * `processMetrics()`.
 */
export class AgentRunMetrics {
  readonly registry = new Registry();
  private readonly made = new Map<string, unknown>();
  private temporalEndpoint?: string;
  private readonly modelLabel = new BoundedLabel(MODEL_LABEL_LIMIT);

  constructor(options: { defaultMetrics?: boolean } = {}) {
    if (options.defaultMetrics) collectDefaultMetrics({ register: this.registry });
  }

  private once<T>(name: string, make: () => T): T {
    if (!this.made.has(name)) this.made.set(name, make());
    return this.made.get(name) as T;
  }

  /** `agentrun_commands_total{type,outcome,reason}`: one per decision of the command consumer. */
  commands(): Counter<'type' | 'outcome' | 'reason'> {
    return this.once('commands', () => new Counter({ name: 'agentrun_commands_total', help: 'Commands decided by the command consumer, by type, outcome and rejection reason', labelNames: ['type', 'outcome', 'reason'], registers: [this.registry] }));
  }

  /** `agentrun_workflow_starts_total{eager}`: runs started by this process, `eager="true"` when a worker of its own took the first task at once. */
  workflowStarts(): Counter<'eager'> {
    return this.once('workflow-starts', () => new Counter({ name: 'agentrun_workflow_starts_total', help: "Workflows this process started, by whether the first task went straight to one of its own workers (eager start) or through the server's matching", labelNames: ['eager'], registers: [this.registry] }));
  }

  /** `agentrun_dlq_total{topic,reason}`: records dead-lettered, by DLQ topic and reason. */
  dlq(): Counter<'topic' | 'reason'> {
    return this.once('dlq', () => new Counter({ name: 'agentrun_dlq_total', help: 'Records dead-lettered, by DLQ topic and reason', labelNames: ['topic', 'reason'], registers: [this.registry] }));
  }

  /**
   * `agentrun_kafka_consumer_lag{group,topic,partition}`, read at scrape time (committed offsets
   * against the high watermarks), so a stalled consumer shows its lag growing. Several groups may register.
   */
  kafkaConsumerLag(group: string, read: () => Promise<LagReading[]>): void {
    const sources = this.once('lag-sources', () => new Map<string, CachedReading<LagReading[]>>());
    sources.set(group, new CachedReading(read));
    this.once(
      'lag',
      () =>
        new Gauge({
          name: 'agentrun_kafka_consumer_lag',
          help: 'Messages of a partition the consumer group has not committed yet (high watermark minus committed offset)',
          labelNames: ['group', 'topic', 'partition'],
          registers: [this.registry],
          async collect() {
            this.reset();
            for (const [groupId, reading] of sources) {
              for (const r of (await reading.get()) ?? []) this.set({ group: groupId, topic: r.topic, partition: String(r.partition) }, r.lag);
            }
          },
        }),
    );
  }

  /**
   * `agentrun_run_events_published_total` and `agentrun_run_event_publish_failures_total`: run events
   * the workflow worker published (by the publishing activity or the workflow-task sink) and Kafka
   * acknowledged, and the publish attempts that failed and will be tried again (the run's later events
   * wait). Published by the stalled-carrier watch too (`stalledCarrierEvents` counts those).
   */
  runEventPublishing(): { published: Counter; failures: Counter } {
    return this.once('run-event-publishing', () => ({
      published: new Counter({ name: 'agentrun_run_events_published_total', help: 'Run events published (by the publishing activity, the calls that carry them, or the workflow-task sink) and acknowledged by Kafka', registers: [this.registry] }),
      failures: new Counter({ name: 'agentrun_run_event_publish_failures_total', help: 'Failed attempts to publish run events (each sent again: by the activity\'s retry, or the run\'s next carrier or publishing activity)', registers: [this.registry] }),
    }));
  }

  /** Made with the stalled-carrier watch (the orchestrator's workflows role), so only that role declares it. */
  stalledCarrierEvents(): Counter {
    return this.once('stalled-carrier-events', () => new Counter({ name: 'agentrun_stalled_carrier_events_total', help: 'Run events the workflow worker published itself, read from the history, because the call carrying them had not started (its lane queued or unserved)', registers: [this.registry] }));
  }

  /** `agentrun_projector_events_total`: run events the projector stored (not dead-lettered). */
  projectorEvents(): Counter {
    return this.once('projector-events', () => new Counter({ name: 'agentrun_projector_events_total', help: 'Run events the projector stored in the read model', registers: [this.registry] }));
  }

  /** `agentrun_projector_batch_duration_seconds`: one fetched batch, from its handler's start to its offsets' commit. */
  projectorBatchDuration(): Histogram {
    return this.once('projector-batch', () => new Histogram({ name: 'agentrun_projector_batch_duration_seconds', help: 'Time to apply one fetched batch of run events (transaction, run-state publish, commit)', buckets: LATENCY_BUCKETS, registers: [this.registry] }));
  }

  /** `agentrun_event_visible_seconds`: from an event's `ts` to its SSE frame being written, one per frame. */
  eventVisible(): Histogram {
    return this.once('event-visible', () => new Histogram({ name: 'agentrun_event_visible_seconds', help: "Delay from a run event's ts to its SSE frame being written", buckets: LATENCY_BUCKETS, registers: [this.registry] }));
  }

  /** `agentrun_sse_errors_total`: SSE streams that failed after they opened (an `error` frame written; the cause is logged). */
  sseErrors(): Counter {
    return this.once('sse-errors', () => new Counter({ name: 'agentrun_sse_errors_total', help: 'SSE streams that failed after they opened (an error frame written, the cause logged under its error id)', registers: [this.registry] }));
  }

  /** `agentrun_run_token_records_unreadable_total`: records on the run-tokens topic a gateway skipped (not a run token delta). */
  runTokensUnreadable(): Counter {
    return this.once('run-tokens-unreadable', () => new Counter({ name: 'agentrun_run_token_records_unreadable_total', help: 'Records on the run-tokens topic this gateway skipped because they are not a run token delta', registers: [this.registry] }));
  }

  /** `agentrun_run_token_deltas_dropped_total`: model reply deltas a send to the run-tokens topic failed for (live only: the step's event keeps the reply). */
  runTokensDropped(): Counter {
    return this.once('run-tokens-dropped', () => new Counter({ name: 'agentrun_run_token_deltas_dropped_total', help: "Model reply deltas not sent to the run-tokens topic (the send failed; the step's event keeps the whole reply)", registers: [this.registry] }));
  }

  /** `agentrun_model_rate_limit_waits_total{model}`: model calls told to wait for a turn under their model's shared rate limits (each a durable timer in its run). */
  rateLimitWaits(): { inc(labels: { model: string }): void } {
    const counter = this.once('rate-limit-waits', () => new Counter({ name: 'agentrun_model_rate_limit_waits_total', help: "Model calls told to wait for a turn under their model's shared rate limits (the run waits on a timer, then calls again)", labelNames: ['model'], registers: [this.registry] }));
    // The model label bounded like the other model metrics'.
    return { inc: ({ model }) => counter.inc({ model: this.modelLabel.of(model) }) };
  }

  /** `agentrun_sse_streams`: open SSE streams, read at scrape time. */
  sseStreams(read: () => number): void {
    this.once('sse-streams', () => new Gauge({ name: 'agentrun_sse_streams', help: 'Open SSE streams of this gateway', registers: [this.registry], collect() { this.set(read()); } }));
  }

  /** `agentrun_http_requests_total` and `agentrun_http_request_duration_seconds`, by route template, method and status. */
  http(): { requests: Counter<'route' | 'method' | 'status'>; duration: Histogram<'route' | 'method' | 'status'> } {
    return this.once('http', () => ({
      requests: new Counter({ name: 'agentrun_http_requests_total', help: 'HTTP requests answered, by route template, method and status', labelNames: ['route', 'method', 'status'], registers: [this.registry] }),
      duration: new Histogram({ name: 'agentrun_http_request_duration_seconds', help: 'HTTP request duration (an SSE stream: its whole life), by route template, method and status', labelNames: ['route', 'method', 'status'], buckets: LATENCY_BUCKETS, registers: [this.registry] }),
    }));
  }

  /** `agentrun_runs_active{kind,status}`: non-terminal runs in the read model, read at scrape time. */
  runsActive(read: () => Promise<ActiveRunsReading[]>): void {
    const reading = new CachedReading(read);
    this.once('runs-active', () => new Gauge({
      name: 'agentrun_runs_active',
      help: 'Runs in the read model that are not terminal, by kind and status',
      labelNames: ['kind', 'status'],
      registers: [this.registry],
      async collect() {
        const rows = await reading.get();
        if (!rows) return;
        this.reset();
        for (const r of rows) this.set({ kind: r.kind, status: r.status }, r.count);
      },
    }));
  }

  /**
   * `agentrun_ready` (1 when `/readyz` would answer 200, else 0) and `agentrun_readiness_check{check}`
   * (1 ok, 0 failed, per check), read at scrape time: a process that is up but cannot reach Kafka,
   * Temporal or Postgres is visible to alerts, which `up` alone does not show.
   */
  readiness(read: () => Promise<{ ready: boolean; checks: Record<string, string> }>): void {
    // Each check is bounded at 2 s and they run at once, so a report later than 3 s means not ready.
    const reading = new CachedReading(read, 3_000);
    // A registry collects its metrics concurrently: both gauges share the one report of a scrape.
    let inScrape: Promise<{ ready: boolean; checks: Record<string, string> } | undefined> | undefined;
    const report = () => (inScrape ??= reading.get().finally(() => (inScrape = undefined)));
    this.once('ready', () => new Gauge({
      name: 'agentrun_ready',
      help: 'Whether this service is ready (its /readyz answers 200): 1 or 0',
      registers: [this.registry],
      async collect() {
        this.set((await report())?.ready ? 1 : 0);
      },
    }));
    this.once('readiness-checks', () => new Gauge({
      name: 'agentrun_readiness_check',
      help: 'One readiness check of this service: 1 ok, 0 failed (why is in the log)',
      labelNames: ['check'],
      registers: [this.registry],
      async collect() {
        const checks = (await report())?.checks ?? {};
        this.reset();
        for (const [check, result] of Object.entries(checks)) this.set({ check }, result === 'ok' ? 1 : 0);
      },
    }));
  }

  /** `agentrun_model_tokens_total{model,direction}` and `agentrun_model_call_duration_seconds{model,outcome}`. */
  model(): { tokens: Counter<'model' | 'direction'>; duration: Histogram<'model' | 'outcome'> } {
    return this.once('model', () => ({
      tokens: new Counter({ name: 'agentrun_model_tokens_total', help: 'Tokens of chat completions as the model server reported them, by model and direction (input, output)', labelNames: ['model', 'direction'], registers: [this.registry] }),
      duration: new Histogram({ name: 'agentrun_model_call_duration_seconds', help: 'Chat completion calls, by model and outcome (ok, or the error kind)', labelNames: ['model', 'outcome'], buckets: MODEL_CALL_BUCKETS, registers: [this.registry] }),
    }));
  }

  /** One chat completion: its duration and, when it succeeded with usage, its tokens. */
  observeModelCall(call: { model: string; seconds: number; outcome: string; inputTokens?: number; outputTokens?: number }): void {
    const model = this.modelLabel.of(call.model);
    const { tokens, duration } = this.model();
    duration.observe({ model, outcome: call.outcome }, call.seconds);
    if (call.inputTokens) tokens.inc({ model, direction: 'input' }, call.inputTokens);
    if (call.outputTokens) tokens.inc({ model, direction: 'output' }, call.outputTokens);
  }

  /** Where the Temporal SDK runtime's own Prometheus exporter listens (loopback); its text is appended to ours. */
  setTemporalEndpoint(url: string | undefined): void {
    this.temporalEndpoint = url;
  }

  /** The whole exposition: our registry, then the Temporal exporter's families (if it answers) that do not collide with ours. */
  async exposition(fetchText: (url: string) => Promise<string> = fetchWithTimeout): Promise<string> {
    const ours = await this.registry.metrics();
    if (!this.temporalEndpoint) return ours;
    let theirs: string;
    try {
      theirs = await fetchText(this.temporalEndpoint);
    } catch {
      // The SDK's exporter is down or slow: our metrics are still served.
      return ours;
    }
    return mergeExposition(ours, theirs);
  }
}

async function fetchWithTimeout(url: string): Promise<string> {
  const res = await fetch(url, { signal: AbortSignal.timeout(SCRAPE_READ_TIMEOUT_MS) });
  if (!res.ok) throw new Error(`${url}: ${res.status}`);
  return res.text();
}

/** The family a `# HELP`/`# TYPE` line or a sample line belongs to (a sample's name before `{` or the value). */
function nameOf(line: string): string | undefined {
  const meta = /^#\s+(?:HELP|TYPE)\s+([a-zA-Z_:][a-zA-Z0-9_:]*)/.exec(line);
  if (meta) return meta[1];
  if (line.startsWith('#')) return undefined;
  const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)/.exec(line);
  return sample?.[1];
}

/** The family names an exposition declares (`# TYPE` lines), with a histogram's or summary's sample names. */
function familyNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const line of text.split('\n')) {
    const m = /^#\s+TYPE\s+([a-zA-Z_:][a-zA-Z0-9_:]*)\s+(\w+)/.exec(line);
    if (!m) continue;
    names.add(m[1]);
    if (m[2] === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(m[1] + s);
    if (m[2] === 'summary') for (const s of ['_sum', '_count']) names.add(m[1] + s);
  }
  return names;
}

/**
 * Appends another exposition (the Temporal SDK's) to ours, leaving out any family whose name ours
 * already has: a scrape with a name twice is refused by Prometheus whole.
 */
export function mergeExposition(ours: string, theirs: string): string {
  const taken = familyNames(ours);
  // A family of theirs is dropped whole: its metadata lines and every sample under it.
  let family: string | undefined;
  const kept: string[] = [];
  for (const line of theirs.split('\n')) {
    if (!line.trim()) continue;
    const typed = /^#\s+(?:HELP|TYPE)\s+([a-zA-Z_:][a-zA-Z0-9_:]*)/.exec(line);
    if (typed) family = typed[1];
    const name = nameOf(line);
    const owner = typed ? typed[1] : name !== undefined && family !== undefined && name.startsWith(family) ? family : name;
    if (owner !== undefined && (taken.has(owner) || (name !== undefined && taken.has(name)))) continue;
    kept.push(line);
  }
  if (!kept.length) return ours;
  return `${ours.endsWith('\n') || !ours ? ours : `${ours}\n`}${kept.join('\n')}\n`;
}

let processWide: AgentRunMetrics | undefined;

/** The process's metrics, with prom-client's default process metrics (`process_*`, `nodejs_*`). */
export function processMetrics(): AgentRunMetrics {
  processWide ??= new AgentRunMetrics({ defaultMetrics: true });
  return processWide;
}
