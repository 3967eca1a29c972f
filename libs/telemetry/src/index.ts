// What operators see of a running service: Prometheus metrics, OpenTelemetry traces, JSON logs.
// It depends on no other project of ours, so every library and app can use it.
export * from './metrics';
export * from './tracing';
export * from './logging';
