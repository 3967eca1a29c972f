import { context, INVALID_SPAN_CONTEXT, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Span } from '@opentelemetry/api';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-node';
import {
  contextFromHeaders,
  contextOfTraceparent,
  currentTraceId,
  currentTraceparent,
  httpTracing,
  initTracing,
  inConsumerSpan,
  inModelCallSpan,
  inSpan,
  linkTo,
  resetTracingForTests,
  shutdownTracing,
  traceHeaders,
  tracesExported,
  tracingState,
} from './tracing';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT_ID = '00f067aa0ba902b7';
const TRACEPARENT = `00-${TRACE_ID}-${PARENT_ID}-01`;
const record = { topic: 't.commands.v1', partition: 2, offset: '17', key: 'run-1' };

afterEach(() => resetTracingForTests());

describe('tracesExported', () => {
  it('exports only when configured by the standard variables, and never with the SDK disabled', () => {
    expect(tracesExported({})).toBe(false);
    expect(tracesExported({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(true);
    expect(tracesExported({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' })).toBe(true);
    expect(tracesExported({ OTEL_TRACES_EXPORTER: 'otlp' })).toBe(true);
    expect(tracesExported({ OTEL_TRACES_EXPORTER: 'console, otlp' })).toBe(true);
    expect(tracesExported({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(false);
    expect(tracesExported({ OTEL_SDK_DISABLED: true, OTEL_TRACES_EXPORTER: 'otlp' })).toBe(false);
  });
});

describe('tracing on', () => {
  let exporter: InMemorySpanExporter;
  beforeEach(() => {
    exporter = new InMemorySpanExporter();
    initTracing('projector', {}, { exporter });
  });
  const finished = async () => {
    await tracingState().spanProcessor!.forceFlush();
    return exporter.getFinishedSpans();
  };

  it('names the service after the app', () => {
    expect(tracingState().exporting).toBe(true);
    expect(tracingState().resource.attributes['service.name']).toBe('projector');
  });

  it('continues the trace of a record that carries a traceparent, in a consumer span with messaging attributes', async () => {
    let inside: string | undefined;
    await inConsumerSpan({ ...record, headers: { traceparent: TRACEPARENT } }, 'agentrun-orchestrator-commands', async () => {
      inside = traceHeaders().traceparent;
    });
    const [span] = await finished();
    expect(span.spanContext().traceId).toBe(TRACE_ID);
    expect(span.parentSpanId).toBe(PARENT_ID);
    expect(span.kind).toBe(SpanKind.CONSUMER);
    expect(span.name).toBe('process t.commands.v1');
    expect(span.attributes).toMatchObject({
      'messaging.system': 'kafka',
      'messaging.destination.name': 't.commands.v1',
      'messaging.destination.partition.id': '2',
      'messaging.consumer.group.name': 'agentrun-orchestrator-commands',
      'messaging.kafka.offset': 17,
    });
    // What the handler publishes carries the consumer span as its parent, in the same trace.
    expect(inside).toBe(`00-${TRACE_ID}-${span.spanContext().spanId}-01`);
  });

  it('starts a new trace for a record without one, or with a malformed or repeated traceparent', async () => {
    for (const headers of [undefined, { traceparent: 'not-a-traceparent' }, { traceparent: [TRACEPARENT, TRACEPARENT] }]) {
      await inConsumerSpan({ ...record, headers }, 'g', async () => undefined);
    }
    const spans = await finished();
    expect(spans).toHaveLength(3);
    for (const span of spans) {
      expect(span.parentSpanId).toBeUndefined();
      expect(span.spanContext().traceId).not.toBe(TRACE_ID);
    }
    expect(new Set(spans.map((s) => s.spanContext().traceId)).size).toBe(3);
  });

  it('reads Buffer header values as kafkajs gives them', () => {
    const ctx = contextFromHeaders({ traceparent: Buffer.from(TRACEPARENT) });
    expect(trace.getSpanContext(ctx)?.traceId).toBe(TRACE_ID);
  });

  it('gives the trace id of the active span for log lines, and none outside one', async () => {
    expect(currentTraceId()).toBeUndefined();
    await inSpan('work', { parent: contextOfTraceparent(TRACEPARENT) }, async () => {
      expect(currentTraceId()).toBe(TRACE_ID);
    });
  });

  it('records a model call by the GenAI conventions, with usage, and error.type when it fails', async () => {
    await inModelCallSpan('qwen-small', async (record) => record({ input_tokens: 12, output_tokens: 5 }));
    await expect(inModelCallSpan('qwen-small', async () => Promise.reject(new RangeError('boom')), { errorType: () => 'rate_limited' })).rejects.toThrow('boom');
    const [ok, failed] = await finished();
    expect(ok.name).toBe('chat qwen-small');
    expect(ok.kind).toBe(SpanKind.CLIENT);
    expect(ok.attributes).toMatchObject({ 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'qwen-small', 'gen_ai.usage.input_tokens': 12, 'gen_ai.usage.output_tokens': 5 });
    expect(ok.attributes['error.type']).toBeUndefined();
    expect(failed.status.code).toBe(SpanStatusCode.ERROR);
    expect(failed.attributes['error.type']).toBe('rate_limited');
  });

  it('links to a stored traceparent, and to nothing for a malformed one', () => {
    expect(linkTo(TRACEPARENT)?.context).toMatchObject({ traceId: TRACE_ID, spanId: PARENT_ID, isRemote: true });
    expect(linkTo('00-zz-yy-01')).toBeUndefined();
    expect(linkTo(null)).toBeUndefined();
  });

  it('continues an HTTP request traceparent in a server span named by its route', async () => {
    const middleware = httpTracing((method) => method === 'POST');
    const listeners: (() => void)[] = [];
    const req = { method: 'POST', url: '/runs/r1/pause', headers: { traceparent: TRACEPARENT }, route: undefined as { path: string } | undefined };
    const res = { statusCode: 202, once: (_: string, listener: () => void) => listeners.push(listener) };
    let inside: string | undefined;
    middleware(req, res, () => {
      inside = currentTraceparent();
    });
    req.route = { path: '/runs/:id/pause' };
    listeners.forEach((l) => l());
    const [span] = await finished();
    expect(span.name).toBe('POST /runs/:id/pause');
    expect(span.kind).toBe(SpanKind.SERVER);
    expect(span.spanContext().traceId).toBe(TRACE_ID);
    expect(span.attributes['http.response.status_code']).toBe(202);
    expect(inside).toBe(`00-${TRACE_ID}-${span.spanContext().spanId}-01`);
  });

  it('flushes what is buffered at shutdown', async () => {
    // The in-memory exporter forgets its spans when it is shut down; keep them to look at.
    exporter.shutdown = () => Promise.resolve();
    await inSpan('last', {}, async () => undefined);
    await shutdownTracing();
    expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual(['last']);
  });
});

describe('tracing off', () => {
  beforeEach(() => initTracing('gateway', {}));

  it('records nothing but carries a caller traceparent on', async () => {
    expect(tracingState().exporting).toBe(false);
    let inside: Record<string, string> = {};
    await inConsumerSpan({ ...record, headers: { traceparent: TRACEPARENT } }, 'g', async (span) => {
      expect(span.isRecording()).toBe(false);
      inside = traceHeaders();
    });
    expect(inside.traceparent).toBe(TRACEPARENT);
  });

  it('has no trace without a caller', async () => {
    let seen: Span | undefined;
    await inConsumerSpan(record, 'g', async (span) => {
      // The span given to the work is the active one, across an await: the context is carried, but
      // with no caller it names no trace (the no-op span's invalid context).
      await Promise.resolve();
      seen = trace.getSpan(context.active());
      expect(seen).toBe(span);
      expect(seen?.spanContext()).toEqual(INVALID_SPAN_CONTEXT);
      expect(traceHeaders()).toEqual({});
      expect(currentTraceId()).toBeUndefined();
    });
    expect(seen?.spanContext()).toEqual(INVALID_SPAN_CONTEXT);
    // And once it is over, the root context is active again, with no span in it.
    expect(context.active()).toBe(ROOT_CONTEXT);
    expect(trace.getSpan(context.active())).toBeUndefined();
  });
});
