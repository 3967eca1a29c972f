import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-node';
import type { RunEventEnvelope } from '@agentrun/contracts';
import { EventSigner, EventVerifier, type KafkaBus, type OutboundMessage } from '@agentrun/kafka';
import { contextOfTraceparent, initTracing, inSpan, resetTracingForTests, tracingState } from '@agentrun/telemetry';
import { createPublishActivities } from './publish.activities';

const TRACE_ID = '0af7651916cd43dd8448eb211c80319c';
const TRACEPARENT = `00-${TRACE_ID}-b7ad6b7169203331-01`;
const key = { kid: 'k1', secret: Buffer.from('a-secret-of-at-least-thirty-two-bytes!!') };

function event(seq: number): RunEventEnvelope {
  return { org: 'acme', run_id: 'agent-1', seq, type: 'step_completed', ts: '2026-01-01T00:00:00.000Z', kind: 'agent', payload: {} } as unknown as RunEventEnvelope;
}

function fakeBus(): { bus: KafkaBus; sent: OutboundMessage[] } {
  const sent: OutboundMessage[] = [];
  return { sent, bus: { send: async (_topic: string, messages: OutboundMessage[]) => void sent.push(...messages) } as unknown as KafkaBus };
}

afterEach(() => resetTracingForTests());

describe('publishRunEvents', () => {
  it("puts the activity's trace on every event as traceparent, beside a signature that still verifies", async () => {
    const exporter = new InMemorySpanExporter();
    initTracing('orchestrator', {}, { exporter });
    const { bus, sent } = fakeBus();
    const activities = createPublishActivities({ bus, topicPrefix: 't.', signer: new EventSigner(key) });
    await inSpan('RunActivity:publishRunEvents', { parent: contextOfTraceparent(TRACEPARENT) }, () => activities.publishRunEvents([event(1), event(2)]));
    await tracingState().spanProcessor!.forceFlush();
    const send = exporter.getFinishedSpans().find((s) => s.kind === SpanKind.PRODUCER)!;
    expect(send.name).toBe('send t.agentrun.run-events.v1');
    expect(send.spanContext().traceId).toBe(TRACE_ID);
    expect(sent).toHaveLength(2);
    for (const message of sent) {
      expect(message.headers?.traceparent).toBe(`00-${TRACE_ID}-${send.spanContext().spanId}-01`);
      expect(new EventVerifier([key]).verify(Buffer.from(message.value), message.headers)).toEqual({ ok: true, kid: 'k1' });
    }
  });

  it('adds no traceparent outside a trace', async () => {
    initTracing('orchestrator', {});
    const { bus, sent } = fakeBus();
    await createPublishActivities({ bus, topicPrefix: '', signer: new EventSigner(key) }).publishRunEvents([event(1)]);
    expect(Object.keys(sent[0].headers ?? {}).sort()).toEqual(['agentrun-key-id', 'agentrun-signature', 'org', 'seq', 'type']);
  });
});
