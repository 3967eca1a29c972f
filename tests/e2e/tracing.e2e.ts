import { randomBytes } from 'node:crypto';
import { TOPICS, type RunEventEnvelope } from '@agentrun/contracts';
import { OtlpReceiver, type ReceivedSpan } from '../support/otlp-receiver';
import { Platform, uniqueId, type TopicRecord } from '../support/platform';
import { SseClient } from '../support/sse';
import { waitFor } from '../support/wait';

const CONSUMER = 5;
const PRODUCER = 4;
const CLIENT = 3;

/** The trace id a `traceparent` header names. */
function traceIdOf(traceparent: string | undefined): string | undefined {
  return /^00-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$/.exec(traceparent ?? '')?.[1];
}

/**
 * Traces from a command to the SSE frame, exported over OTLP/HTTP to a receiver this test runs: only
 * this test's platform exports (its apps get the OTEL_* settings; every other platform leaves them unset).
 */
describe('OpenTelemetry traces from a Kafka command to the SSE frame', () => {
  let receiver: OtlpReceiver;
  let platform: Platform;
  let events: TopicRecord<RunEventEnvelope>[];
  const org = 'acme';

  beforeAll(async () => {
    receiver = await OtlpReceiver.start();
    platform = new Platform({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url });
    await platform.start();
    events = await platform.follow<RunEventEnvelope>(TOPICS.runEvents);
  });
  afterAll(async () => {
    await platform?.stop();
    await receiver?.close();
  });

  const eventsOf = (runId: string) => events.filter((e) => e.value.org === org && e.value.run_id === runId);
  const allEventsOnTopic = async (runId: string): Promise<TopicRecord<RunEventEnvelope>[]> => {
    const [{ last_seq }] = await platform.query<{ last_seq: number }>('SELECT last_seq FROM runs WHERE org = $1 AND run_id = $2', [org, runId]);
    await waitFor(`the ${last_seq} events of ${runId} on the topic`, () => new Set(eventsOf(runId).map((e) => e.value.seq)).size === last_seq);
    return eventsOf(runId);
  };
  const named = (spans: ReceivedSpan[], service: string, name: string | RegExp) =>
    spans.filter((s) => s.service === service && (typeof name === 'string' ? s.name === name : name.test(s.name)));
  const parentsExported = (spans: ReceivedSpan[], children: ReceivedSpan[]) => children.every((c) => spans.some((s) => s.spanId === c.parentSpanId));

  it("continues a command's traceparent through the consumer, the workflow, its activities, the run events, the projector and the SSE frames", async () => {
    const traceId = randomBytes(16).toString('hex');
    const callerSpan = randomBytes(8).toString('hex');
    const runId = uniqueId('traced');
    const command = { command_id: uniqueId('c'), type: 'agent.start', org, run_id: runId, payload: { goal: '[scenario:agent] find the parser notes', max_steps: 12, policy: 'llm' } };
    await platform.publishCommands([{ key: runId, value: JSON.stringify(command), headers: { traceparent: `00-${traceId}-${callerSpan}-01` } }]);
    await platform.waitForStatus(org, runId, 'done');

    // Every run event on the topic carries the command's trace.
    const published = await allEventsOnTopic(runId);
    expect(published.length).toBeGreaterThan(3);
    for (const record of published) expect(traceIdOf(record.headers.traceparent)).toBe(traceId);

    const sse = new SseClient(`${platform.gatewayUrl}/runs/${runId}/events`, { 'X-Org': org });
    await sse.finished();
    const frames = sse.events().length;
    expect(frames).toBe(new Set(published.map((e) => e.value.seq)).size);

    const commandsTopic = platform.topic(TOPICS.commands);
    const runEventsTopic = platform.topic(TOPICS.runEvents);
    await waitFor('the spans of the run, exported', () => {
      const spans = receiver.inTrace(traceId);
      return (
        named(spans, 'orchestrator', `process ${commandsTopic}`).length === 1 &&
        named(spans, 'orchestrator', 'RunWorkflow:AgentRun').length >= 1 &&
        named(spans, 'orchestrator', `send ${runEventsTopic}`).length >= 1 &&
        named(spans, 'gpu-worker', /^RunActivity:/).length >= 1 &&
        named(spans, 'projector', `process ${runEventsTopic}`).length >= 1 &&
        named(spans, 'gateway', 'send sse frame').length >= frames &&
        // Each send's activity span ends (and is exported) after the send does.
        parentsExported(spans, named(spans, 'orchestrator', `send ${runEventsTopic}`)) &&
        parentsExported(spans, named(spans, 'gpu-worker', `send ${runEventsTopic}`))
      );
    }, 60_000, 250);
    const spans = receiver.inTrace(traceId);

    const [consumer] = named(spans, 'orchestrator', `process ${commandsTopic}`);
    expect(consumer).toMatchObject({ kind: CONSUMER, parentSpanId: callerSpan });
    expect(consumer.attributes).toMatchObject({ 'messaging.system': 'kafka', 'messaging.destination.name': commandsTopic, 'messaging.consumer.group.name': expect.stringContaining('agentrun-orchestrator-commands') });
    // The workflow start is the consumer's child; the workflow's run, the start's.
    const [start] = named(spans, 'orchestrator', 'StartWorkflow:AgentRun');
    expect(start.parentSpanId).toBe(consumer.spanId);
    expect(named(spans, 'orchestrator', 'RunWorkflow:AgentRun')[0].parentSpanId).toBe(start.spanId);
    // Activities on both lanes in the trace; the events go out with the orchestrator's calls (those
    // that carry them) and the publishing activity.
    const publishing = named(spans, 'orchestrator', /^RunActivity:/);
    expect(named(spans, 'orchestrator', 'RunActivity:publishRunEvents').length).toBeGreaterThanOrEqual(1);
    expect(named(spans, 'orchestrator', /^RunActivity:(runTool|callModel|prepareWorkspace)/).length).toBeGreaterThanOrEqual(1);
    // The model calls, by the GenAI conventions.
    const chats = named(spans, 'orchestrator', /^chat /);
    expect(chats.length).toBeGreaterThanOrEqual(2);
    for (const chat of chats) {
      expect(chat.kind).toBe(CLIENT);
      expect(chat.attributes).toMatchObject({ 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'scripted' });
      expect(chat.attributes['gen_ai.usage.input_tokens']).toEqual(expect.any(Number));
      expect(chat.attributes['gen_ai.usage.output_tokens']).toEqual(expect.any(Number));
    }
    // The events' traceparent names a publish span of the trace: the orchestrator's, or the gpu-worker's
    // for the events a GPU call carried.
    const sends = [...named(spans, 'orchestrator', `send ${runEventsTopic}`), ...named(spans, 'gpu-worker', `send ${runEventsTopic}`)];
    expect(sends.every((s) => s.kind === PRODUCER)).toBe(true);
    // Each under the activity that sent it.
    const publishIds = new Set([...publishing, ...named(spans, 'gpu-worker', /^RunActivity:/)].map((s) => s.spanId));
    expect(sends.every((s) => publishIds.has(s.parentSpanId ?? ''))).toBe(true);
    const sendIds = new Set(sends.map((s) => s.spanId));
    for (const record of published) expect(sendIds.has(record.headers.traceparent.split('-')[2])).toBe(true);
    // The projector's batches link to each event's trace (and, one run per batch, are in it).
    const batches = receiver.spans.filter((s) => s.service === 'projector' && s.links.some((l) => l.traceId === traceId));
    expect(batches.length).toBeGreaterThanOrEqual(1);
    expect(batches.every((b) => b.kind === CONSUMER && b.name === `process ${runEventsTopic}`)).toBe(true);
    // One span per SSE frame written, each a child of the publish span of its event.
    const sseSpans = named(spans, 'gateway', 'send sse frame');
    expect(sseSpans.filter((s) => s.attributes['agentrun.run_id'] === runId)).toHaveLength(frames);
    for (const span of sseSpans) expect(sendIds.has(span.parentSpanId ?? '')).toBe(true);
  });

  it('a command without a traceparent starts one trace that the whole run shares', async () => {
    const runId = uniqueId('untraced');
    await platform.publishCommand({ command_id: uniqueId('c'), type: 'agent.start', org, run_id: runId, payload: { goal: 'summarise the workspace', max_steps: 4 } });
    await platform.waitForStatus(org, runId, 'done');
    const published = await allEventsOnTopic(runId);
    const traces = new Set(published.map((e) => traceIdOf(e.headers.traceparent)));
    expect(traces.size).toBe(1);
    const [traceId] = [...traces];
    expect(traceId).toMatch(/^[0-9a-f]{32}$/);

    const commandsTopic = platform.topic(TOPICS.commands);
    const sendName = `send ${platform.topic(TOPICS.runEvents)}`;
    await waitFor('the run spans, exported', () => {
      const spans = receiver.inTrace(traceId!);
      const sends = named(spans, 'orchestrator', sendName);
      return named(spans, 'orchestrator', 'RunWorkflow:AgentRun').length >= 1 && sends.length >= 1 && parentsExported(spans, sends);
    }, 60_000, 250);
    const spans = receiver.inTrace(traceId!);
    // The trace starts at the consumer: a root span, with the workflow start under it.
    const [consumer] = named(spans, 'orchestrator', `process ${commandsTopic}`);
    expect(consumer.parentSpanId).toBeUndefined();
    expect(named(spans, 'orchestrator', 'StartWorkflow:AgentRun')[0].parentSpanId).toBe(consumer.spanId);
    const sends = named(spans, 'orchestrator', sendName);
    expect(sends.length).toBeGreaterThanOrEqual(1);
    const publishIds = new Set(named(spans, 'orchestrator', /^RunActivity:/).map((s) => s.spanId));
    expect(sends.every((s) => publishIds.has(s.parentSpanId ?? ''))).toBe(true);
    expect(receiver.refused).toBe(0);
  });
});
