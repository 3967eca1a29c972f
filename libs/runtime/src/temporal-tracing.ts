import type { WorkflowClientInterceptor } from '@temporalio/client';
import {
  makeWorkflowExporter,
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
  OpenTelemetryWorkflowClientInterceptor,
  type OpenTelemetryWorkflowExporter,
} from '@temporalio/interceptors-opentelemetry';
import type { InjectedSink, WorkerOptions } from '@temporalio/worker';
import type { Resource } from '@opentelemetry/resources';
import { tracingState } from '@agentrun/telemetry';

/**
 * The workflow side: the Temporal SDK's OpenTelemetry workflow interceptors, for executions started in a
 * trace (workflow-tracing.interceptors.ts). tools/bundle-workflows.js puts the module in the workflow
 * bundle (a worker given a bundle cannot add interceptor modules); a worker that bundles the workflows
 * itself (workflowsPath) gets it here.
 */
export const WORKFLOW_TRACING_MODULE = require.resolve('./workflow-tracing.interceptors');

/** The client interceptor that starts, signals and queries workflows in a span and hands its context to the workflow in headers. */
export function workflowClientTracing(): WorkflowClientInterceptor[] {
  return [new OpenTelemetryWorkflowClientInterceptor()];
}

/**
 * A lane's worker options with tracing: activities run in a span whose parent the workflow sent in
 * the activity's headers (so what they publish carries the trace), and workflow spans, made inside
 * the sandbox, leave it through the `exporter` sink into this process's span processor. Off, that sink
 * drops them: the bundled workflow interceptors always call it, and an unregistered sink is an error.
 */
export function withWorkerTracing<T extends Omit<WorkerOptions, 'connection' | 'namespace'>>(lane: T): T {
  const { spanProcessor, resource } = tracingState();
  const exporter: InjectedSink<OpenTelemetryWorkflowExporter> = spanProcessor
    ? makeWorkflowExporter(spanProcessor, resource as Resource)
    : { export: { fn: () => undefined } };
  const bundlesItself = lane.workflowsPath !== undefined && lane.workflowBundle === undefined;
  return {
    ...lane,
    interceptors: {
      ...lane.interceptors,
      // Outermost, so what the lane's own interceptors do (publishing carried run events) is in the activity's span.
      activity: [
        (ctx) => ({ inbound: new OpenTelemetryActivityInboundInterceptor(ctx), outbound: new OpenTelemetryActivityOutboundInterceptor(ctx) }),
        ...(lane.interceptors?.activity ?? []),
      ],
      ...(bundlesItself ? { workflowModules: [...(lane.interceptors?.workflowModules ?? []), WORKFLOW_TRACING_MODULE] } : {}),
    },
    sinks: { ...lane.sinks, exporter },
  };
}
