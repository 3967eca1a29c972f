/**
 * Workflow interceptors (bundled into the workflow code, run in Temporal's sandbox): the Temporal SDK's
 * OpenTelemetry workflow interceptors, for the executions started in a trace only.
 *
 * An execution whose start carried a trace context (the `_tracer-data` header the client interceptor
 * writes, holding a `traceparent`) is traced: a span for the run, one per activity, child workflow,
 * signal sent and continue-as-new, each handing its context on in headers, and the spans leave the
 * sandbox through the `exporter` sink. Any other execution (started outside a trace, or before this
 * existed, so every history recorded earlier) runs through these interceptors untouched: no span, no
 * extra microtask, nothing sent to the sink. The choice is made from the start's headers, which are in
 * the history, so a replay makes the same one. Signals, updates and queries are traced when their own
 * headers carry a trace.
 *
 * Only `@temporalio/*` here: this file is workflow code (tools/bundle-workflows.js). The SDK's
 * interceptors module is required on the first traced call, not at start-up (see `otel`).
 */
import type { Payload } from '@temporalio/common';
import { defaultPayloadConverter } from '@temporalio/common';
import type { WorkflowInboundCallsInterceptor, WorkflowInterceptors, WorkflowInternalsInterceptor, WorkflowOutboundCallsInterceptor } from '@temporalio/workflow';
import type * as OtelWorkflow from '@temporalio/interceptors-opentelemetry/lib/workflow';
import type { OpenTelemetryInboundInterceptor, OpenTelemetryInternalsInterceptor, OpenTelemetryOutboundInterceptor } from '@temporalio/interceptors-opentelemetry/lib/workflow';

/**
 * The SDK's interceptors, loaded on the first traced call. Every new execution initialises the bundle's
 * modules again, and theirs (OpenTelemetry's SDK, and the browser globals it needs) took about 2 ms of
 * it; an untraced execution never needs them.
 */
let otelModule: typeof OtelWorkflow | undefined;
function otel(): typeof OtelWorkflow {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded lazily, so an untraced execution never starts it
  return (otelModule ??= require('@temporalio/interceptors-opentelemetry/lib/workflow') as typeof OtelWorkflow);
}

/** The header the SDK's OpenTelemetry interceptors carry the trace context in. */
const TRACE_HEADER = '_tracer-data';

type Headers = Record<string, Payload> | null | undefined;
type AnyNext = (input: unknown) => unknown;
type AnyMethod = (input: unknown, next: AnyNext) => unknown;

/** True when the headers hold a trace context with a `traceparent`. */
export function carriesTrace(headers: Headers): boolean {
  const payload = headers?.[TRACE_HEADER];
  if (!payload) return false;
  try {
    const carrier = defaultPayloadConverter.fromPayload<Record<string, unknown> | null>(payload);
    return typeof carrier?.traceparent === 'string';
  } catch {
    return false;
  }
}

const INBOUND = ['execute', 'handleSignal', 'handleUpdate', 'validateUpdate', 'handleQuery'] as const;
const OUTBOUND = ['scheduleActivity', 'scheduleLocalActivity', 'startNexusOperation', 'startChildWorkflowExecution', 'continueAsNew', 'signalWorkflow', 'getLogAttributes', 'getMetricTags'] as const;

export const interceptors = (): WorkflowInterceptors => {
  // Per execution: set from the start's headers before any of its jobs runs.
  let traced = false;
  let inbound: OpenTelemetryInboundInterceptor | undefined;
  let outbound: OpenTelemetryOutboundInterceptor | undefined;
  let internals: OpenTelemetryInternalsInterceptor | undefined;
  // Made on first use, so an untraced execution never sets up a tracer.
  const tracedInbound = () => (inbound ??= new (otel().OpenTelemetryInboundInterceptor)()) as unknown as Record<string, AnyMethod>;
  const tracedOutbound = () => (outbound ??= new (otel().OpenTelemetryOutboundInterceptor)()) as unknown as Record<string, AnyMethod>;

  const inboundCalls: Record<string, AnyMethod> = {};
  for (const name of INBOUND) {
    inboundCalls[name] = (input, next) => {
      // The run's own span follows the start; a handler's, the headers of the call that brought it.
      const on = name === 'execute' ? traced : carriesTrace((input as { headers?: Headers }).headers);
      return on ? tracedInbound()[name].call(inbound, input, next) : next(input);
    };
  }
  const outboundCalls: Record<string, AnyMethod> = {};
  for (const name of OUTBOUND) {
    outboundCalls[name] = (input, next) => (traced ? tracedOutbound()[name].call(outbound, input, next) : next(input));
  }
  const internalCalls: WorkflowInternalsInterceptor = {
    activate(input, next) {
      const first = input.activation.jobs?.[0]?.initializeWorkflow;
      if (first) traced = carriesTrace(first.headers as Headers);
      return next(input);
    },
    dispose(input, next): void {
      if (!inbound && !outbound) return next(input);
      // The SDK's own dispose (it forgets the execution's tracing context) returns a promise nobody awaits.
      void (internals ??= new (otel().OpenTelemetryInternalsInterceptor)()).dispose(input, next);
    },
  };
  return {
    inbound: [inboundCalls as WorkflowInboundCallsInterceptor],
    outbound: [outboundCalls as WorkflowOutboundCallsInterceptor],
    internals: [internalCalls],
  };
};
