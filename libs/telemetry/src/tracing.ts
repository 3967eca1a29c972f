// Traces: OpenTelemetry with W3C trace context, exported over OTLP/HTTP only when the standard OTEL_*
// variables ask for it. Off, nothing is recorded or sent; the trace context of a message is still
// carried on (a caller's `traceparent` reaches the run events), which costs a header and no span.
import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type SpanContext,
  type SpanOptions,
  type Tracer,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator, parseTraceParent } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { Resource, detectResourcesSync, envDetectorSync, type IResource } from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider, type SpanExporter, type SpanProcessor } from '@opentelemetry/sdk-trace-node';
import { ATTR_ERROR_TYPE, ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';

/** The W3C header carrying the trace id and the parent span id, on Kafka records as on HTTP. */
export const TRACEPARENT_HEADER = 'traceparent';
export const TRACESTATE_HEADER = 'tracestate';
const TRACER_NAME = '@agentrun/telemetry';

/** The standard OTEL_* settings this process acts on (declared in libs/config's `tracingSpec`). */
export interface TracingSettings {
  OTEL_SDK_DISABLED?: boolean;
  /** `otlp` exports; `none` (or anything without `otlp`) does not. Unset: exports when an endpoint is set. */
  OTEL_TRACES_EXPORTER?: string;
  OTEL_EXPORTER_OTLP_ENDPOINT?: string;
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?: string;
}

/** Whether these settings export traces: the SDK off wins, then the exporter named, then an endpoint given. */
export function tracesExported(settings: TracingSettings): boolean {
  if (settings.OTEL_SDK_DISABLED) return false;
  const exporters = (settings.OTEL_TRACES_EXPORTER ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  if (exporters.length > 0) return exporters.includes('otlp');
  return Boolean(settings.OTEL_EXPORTER_OTLP_ENDPOINT || settings.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

export interface TracingState {
  /** True when spans are recorded and exported. */
  readonly exporting: boolean;
  readonly resource: IResource;
  /** The processor exported spans go through (workflow spans, copied out of Temporal's sandbox, join it); none when off. */
  readonly spanProcessor?: SpanProcessor;
}

let state: TracingState | undefined;
let provider: NodeTracerProvider | undefined;

/**
 * Sets up tracing for this process, once, before anything makes a span: the W3C propagator and an
 * AsyncLocalStorage context, always; the tracer provider (service.name = the app unless
 * OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say otherwise) with an OTLP/HTTP exporter behind a
 * batch processor only when the settings export. `exporter` replaces the OTLP one (tests).
 */
export function initTracing(serviceName: string, settings: TracingSettings, options: { exporter?: SpanExporter } = {}): TracingState {
  if (state) return state;
  const resource = Resource.default()
    .merge(new Resource({ [ATTR_SERVICE_NAME]: serviceName }))
    // OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME, read by the SDK's own detector, win over the app's name.
    .merge(detectResourcesSync({ detectors: [envDetectorSync] }));
  const contextManager = new AsyncLocalStorageContextManager();
  const propagator = new W3CTraceContextPropagator();
  if (!tracesExported(settings) && !options.exporter) {
    context.setGlobalContextManager(contextManager.enable());
    propagation.setGlobalPropagator(propagator);
    state = { exporting: false, resource };
    return state;
  }
  // The exporter reads the endpoint, headers and timeout from the standard variables itself.
  const spanProcessor = new BatchSpanProcessor(options.exporter ?? new OTLPTraceExporter(), { scheduledDelayMillis: 1000, maxExportBatchSize: 512 });
  provider = new NodeTracerProvider({ resource, spanProcessors: [spanProcessor] });
  provider.register({ contextManager, propagator });
  state = { exporting: true, resource, spanProcessor };
  return state;
}

/** What initTracing set up (off, with the default resource, when it was not called). */
export function tracingState(): TracingState {
  return state ?? { exporting: false, resource: Resource.default() };
}

/** Sends what is buffered and stops exporting; part of a service's stop. Safe to call when off or twice. */
export async function shutdownTracing(): Promise<void> {
  const current = provider;
  provider = undefined;
  if (current) await current.shutdown();
}

/** Tests only: forget the set-up, so another can be made. */
export async function resetTracingForTests(): Promise<void> {
  await shutdownTracing();
  state = undefined;
  trace.disable();
  context.disable();
  propagation.disable();
}

export function tracer(): Tracer {
  return trace.getTracer(TRACER_NAME);
}

type HeaderValue = string | string[] | Buffer | undefined | null;
const headerGetter = {
  keys: (carrier: Record<string, HeaderValue>) => Object.keys(carrier),
  get: (carrier: Record<string, HeaderValue>, key: string): string | undefined => {
    const value = carrier[key];
    // A header sent twice is ambiguous: not a parent.
    if (value === undefined || value === null || Array.isArray(value)) return undefined;
    return Buffer.isBuffer(value) ? value.toString('utf8') : value;
  },
};

/** The context a record's or request's `traceparent` (and `tracestate`) names, on top of `base`; `base` when there is none or it is malformed. */
export function contextFromHeaders(headers: Record<string, HeaderValue> | undefined, base: Context = ROOT_CONTEXT): Context {
  if (!headers) return base;
  return propagation.extract(base, headers, headerGetter);
}

/** `traceparent` (and `tracestate`) for the span active in `ctx`: empty when there is no valid one. */
export function traceHeaders(ctx: Context = context.active()): Record<string, string> {
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  return carrier;
}

/** The `traceparent` of the span active in `ctx`, if any. */
export function currentTraceparent(ctx: Context = context.active()): string | undefined {
  return traceHeaders(ctx)[TRACEPARENT_HEADER];
}

/** The span context a stored `traceparent` names, if it is well formed. */
export function spanContextOf(traceparent: string | null | undefined): SpanContext | undefined {
  if (!traceparent) return undefined;
  const parsed = parseTraceParent(traceparent);
  return parsed ? { ...parsed, isRemote: true } : undefined;
}

/** A span link to what a stored `traceparent` names (the projector's batch to each event's trace). */
export function linkTo(traceparent: string | null | undefined, attributes?: Attributes): Link | undefined {
  const spanContext = spanContextOf(traceparent);
  return spanContext ? { context: spanContext, ...(attributes ? { attributes } : {}) } : undefined;
}

/** The context whose parent is what `traceparent` names (or `base` when it names nothing). */
export function contextOfTraceparent(traceparent: string | null | undefined, base: Context = ROOT_CONTEXT): Context {
  const spanContext = spanContextOf(traceparent);
  return spanContext ? trace.setSpanContext(base, spanContext) : base;
}

/** The trace id of the active span, for log lines; undefined outside a trace. */
export function currentTraceId(): string | undefined {
  const spanContext = trace.getActiveSpan()?.spanContext();
  return spanContext && trace.isSpanContextValid(spanContext) ? spanContext.traceId : undefined;
}

export interface InSpanOptions extends SpanOptions {
  /** The parent context; the active one by default. */
  parent?: Context;
  /** The `error.type` a failure records (the error's name by default). */
  errorType?: (err: unknown) => string;
}

/**
 * Runs `fn` in a new span, active for everything `fn` awaits: ended when `fn` settles, marked as an
 * error (with `error.type` and the exception) when it throws. Off, the span is the no-op one.
 */
export async function inSpan<T>(name: string, options: InSpanOptions, fn: (span: Span) => Promise<T>): Promise<T> {
  const { parent, errorType, ...spanOptions } = options;
  const parentContext = parent ?? context.active();
  const span = tracer().startSpan(name, spanOptions, parentContext);
  try {
    return await context.with(trace.setSpan(parentContext, span), () => fn(span));
  } catch (err) {
    if (span.isRecording()) {
      span.setAttribute(ATTR_ERROR_TYPE, errorType?.(err) ?? errorTypeOf(err));
      span.recordException(err instanceof Error ? err : String(err));
      span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
    }
    throw err;
  } finally {
    span.end();
  }
}

/** `inSpan` for synchronous work (an SSE frame written): the span is ended when `fn` returns or throws. */
export function inSpanSync<T>(name: string, options: InSpanOptions, fn: (span: Span) => T): T {
  const { parent, errorType, ...spanOptions } = options;
  const parentContext = parent ?? context.active();
  const span = tracer().startSpan(name, spanOptions, parentContext);
  try {
    return context.with(trace.setSpan(parentContext, span), () => fn(span));
  } catch (err) {
    if (span.isRecording()) {
      span.setAttribute(ATTR_ERROR_TYPE, errorType?.(err) ?? errorTypeOf(err));
      span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
    }
    throw err;
  } finally {
    span.end();
  }
}

function errorTypeOf(err: unknown): string {
  if (err instanceof Error) return err.name && err.name !== 'Error' ? err.name : (err.constructor?.name ?? 'Error');
  return '_OTHER';
}

/** Messaging attributes (OpenTelemetry semantic conventions) of a Kafka record being processed. */
export function kafkaConsumeAttributes(record: { topic: string; partition: number; offset: string; key?: string | Buffer | null }, group: string): Attributes {
  const key = Buffer.isBuffer(record.key) ? record.key.toString('utf8') : record.key;
  return {
    'messaging.system': 'kafka',
    'messaging.operation.type': 'process',
    'messaging.operation.name': 'process',
    'messaging.destination.name': record.topic,
    'messaging.destination.partition.id': String(record.partition),
    'messaging.consumer.group.name': group,
    'messaging.kafka.offset': Number(record.offset),
    ...(key ? { 'messaging.kafka.message.key': key } : {}),
  };
}

/**
 * Runs the processing of one Kafka record in a consumer span whose parent is the record's
 * `traceparent` (a new trace when it has none).
 */
export function inConsumerSpan<T>(
  record: { topic: string; partition: number; offset: string; key?: string | Buffer | null; headers?: Record<string, HeaderValue> },
  group: string,
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  return inSpan(
    `process ${record.topic}`,
    { kind: SpanKind.CONSUMER, parent: contextFromHeaders(record.headers, ROOT_CONTEXT), attributes: kafkaConsumeAttributes(record, group) },
    fn,
  );
}

/** Token counts a model call reports, for its span. */
export interface ModelUsage {
  input_tokens?: number;
  output_tokens?: number;
}

/**
 * A model call as a span by the OpenTelemetry GenAI conventions: `chat {model}`, kind CLIENT, with
 * `gen_ai.operation.name`, `gen_ai.request.model`, the usage `fn` reports through `record`, and
 * `error.type` on failure.
 */
export function inModelCallSpan<T>(
  model: string,
  fn: (record: (usage: ModelUsage & { responseModel?: string; finishReasons?: string[] }) => void) => Promise<T>,
  options: { system?: string; serverAddress?: string; errorType?: (err: unknown) => string } = {},
): Promise<T> {
  return inSpan(
    `chat ${model}`,
    {
      kind: SpanKind.CLIENT,
      attributes: {
        'gen_ai.operation.name': 'chat',
        'gen_ai.request.model': model,
        'gen_ai.system': options.system ?? 'openai',
        ...(options.serverAddress ? { 'server.address': options.serverAddress } : {}),
      },
      ...(options.errorType ? { errorType: options.errorType } : {}),
    },
    (span) =>
      fn((usage) => {
        if (!span.isRecording()) return;
        if (usage.input_tokens !== undefined) span.setAttribute('gen_ai.usage.input_tokens', usage.input_tokens);
        if (usage.output_tokens !== undefined) span.setAttribute('gen_ai.usage.output_tokens', usage.output_tokens);
        if (usage.responseModel) span.setAttribute('gen_ai.response.model', usage.responseModel);
        if (usage.finishReasons?.length) span.setAttribute('gen_ai.response.finish_reasons', usage.finishReasons);
      }),
  );
}

interface HttpRequestLike {
  method?: string;
  url?: string;
  originalUrl?: string;
  headers: Record<string, string | string[] | undefined>;
  route?: { path?: string };
}
interface HttpResponseLike {
  statusCode: number;
  once(event: 'finish' | 'close', listener: () => void): unknown;
}

/**
 * Express-style middleware: requests whose method `traced` accepts (the command routes' POST) run in a
 * SERVER span continuing the request's `traceparent`, named by the route template once it is known.
 */
export function httpTracing(traced: (method: string, path: string) => boolean): (req: HttpRequestLike, res: HttpResponseLike, next: () => void) => void {
  return (req, res, next) => {
    const method = req.method ?? 'GET';
    const path = (req.originalUrl ?? req.url ?? '/').split('?')[0];
    if (!traced(method, path)) return next();
    const parent = contextFromHeaders(req.headers, ROOT_CONTEXT);
    const span = tracer().startSpan(method, { kind: SpanKind.SERVER, attributes: { 'http.request.method': method } }, parent);
    let ended = false;
    const end = () => {
      if (ended) return;
      ended = true;
      if (span.isRecording()) {
        const route = req.route?.path;
        if (route) {
          span.updateName(`${method} ${route}`);
          span.setAttribute('http.route', route);
        }
        span.setAttribute('http.response.status_code', res.statusCode);
        if (res.statusCode >= 500) {
          span.setAttribute(ATTR_ERROR_TYPE, String(res.statusCode));
          span.setStatus({ code: SpanStatusCode.ERROR });
        }
      }
      span.end();
    };
    res.once('finish', end);
    res.once('close', end);
    context.with(trace.setSpan(parent, span), next);
  };
}
