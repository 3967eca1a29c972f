import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-node';
import type { RunEventEnvelope } from '@agentrun/contracts';
import { EventSigner, EventVerifier, type KafkaBus, type OutboundMessage } from '@agentrun/kafka';
import type { FaultPoints } from '@agentrun/config';
import { contextOfTraceparent, initTracing, inSpan, processMetrics, resetTracingForTests, tracingState } from '@agentrun/telemetry';
import { CARRIED_EVENTS_KEY, CARRIED_RESULT_KEY, TRACEPARENT_MEMO } from '@agentrun/workflows';
import { carriedEventsInterceptor, createPublishActivities, requestsOf, RunEventPublisher } from './publish.activities';

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

describe('RunEventPublisher (the workflow worker sink)', () => {
  const workflow = (runId: string, memo?: Record<string, unknown>) => ({ workflowId: `acme/${runId}`, runId, ...(memo ? { memo } : {}) });

  it("sends one workflow task's events (calls made in the same turn) as one request, each run's apart", async () => {
    initTracing('orchestrator', {});
    const requests: OutboundMessage[][] = [];
    const bus = { send: async (_topic: string, messages: OutboundMessage[]) => void requests.push(messages) } as unknown as KafkaBus;
    const publisher = new RunEventPublisher({ bus, topicPrefix: '', signer: new EventSigner(key) });
    const acked = [publisher.publish(workflow('r1'), [event(1)]), publisher.publish(workflow('r1'), [event(2)]), publisher.publish(workflow('r2'), [event(1)])];
    expect(requests).toHaveLength(0);
    await Promise.all(acked);
    expect(requests.map((r) => r.map((m) => m.headers?.seq))).toEqual([['1', '2'], ['1']]);
    // A later task of the same run is a request of its own.
    await publisher.publish(workflow('r1'), [event(3)]);
    expect(requests).toHaveLength(3);
  });

  it('resolves only once Kafka acknowledged: a failed attempt is retried, and counted', async () => {
    initTracing('orchestrator', {});
    let attempts = 0;
    const sent: OutboundMessage[] = [];
    const bus = {
      send: async (_topic: string, messages: OutboundMessage[]) => {
        attempts += 1;
        if (attempts < 3) throw new Error('broker not available');
        sent.push(...messages);
      },
    } as unknown as KafkaBus;
    const failures: number[] = [];
    const publisher = new RunEventPublisher({ bus, topicPrefix: '', signer: new EventSigner(key) }, { backoffMs: 1, onFailure: (_w, attempt) => failures.push(attempt) });
    const failed = async () => (await processMetrics().runEventPublishing().failures.get()).values[0]?.value ?? 0;
    const before = await failed();
    await publisher.publish(workflow('r1'), [event(1), event(2)]);
    expect(attempts).toBe(3);
    expect(failures).toEqual([1, 2]);
    expect(sent.map((m) => m.headers?.seq)).toEqual(['1', '2']);
    expect((await failed()) - before).toBe(2);
  });

  it('sends again when the ack is lost (the fault point): a duplicate, never a loss', async () => {
    initTracing('orchestrator', {});
    const { bus, sent } = fakeBus();
    // The first attempt loses its ack, as `publish.lose_ack_every` makes it.
    let passes = 0;
    const faults = { hit: (name: string) => name === 'publish.lose_ack_every' && ++passes === 1 } as unknown as FaultPoints;
    const failures: unknown[] = [];
    const publisher = new RunEventPublisher({ bus, topicPrefix: '', signer: new EventSigner(key), faults }, { backoffMs: 1, onFailure: (_w, _a, err) => failures.push(err) });
    await publisher.publish(workflow('r1'), [event(1)]);
    expect(sent.map((m) => m.headers?.seq)).toEqual(['1', '1']);
    expect(String(failures[0])).toMatch(/ack of 1 published events was lost/);
  });

  it("makes each send span a child of the run's start trace (the `traceparent` memo)", async () => {
    const exporter = new InMemorySpanExporter();
    initTracing('orchestrator', {}, { exporter });
    const { bus, sent } = fakeBus();
    await new RunEventPublisher({ bus, topicPrefix: 't.', signer: new EventSigner(key) }).publish(workflow('r1', { [TRACEPARENT_MEMO]: TRACEPARENT }), [event(1)]);
    await tracingState().spanProcessor!.forceFlush();
    const send = exporter.getFinishedSpans().find((s) => s.kind === SpanKind.PRODUCER)!;
    expect(send.spanContext().traceId).toBe(TRACE_ID);
    expect(send.parentSpanId).toBe('b7ad6b7169203331');
    expect(sent[0].headers?.traceparent).toBe(`00-${TRACE_ID}-${send.spanContext().spanId}-01`);
  });
});

describe('requestsOf', () => {
  it('keeps the order and splits where the next event would pass the byte bound; a large event goes alone', () => {
    const sized = (seq: number, chars: number) => ({ ...event(seq), payload: { text: 'x'.repeat(chars) } }) as unknown as RunEventEnvelope;
    const one = Buffer.byteLength(JSON.stringify(sized(1, 100)));
    const groups = requestsOf([sized(1, 100), sized(2, 100), sized(3, 100), sized(4, 5000), sized(5, 100)], one * 2);
    expect(groups.map((g) => g.map((e) => e.seq))).toEqual([[1, 2], [3], [4], [5]]);
    expect(requestsOf([])).toEqual([]);
  });
});

describe('carriedEventsInterceptor (the cpu-tools and gpu-tools lanes)', () => {
  const ctx = { info: { activityType: 'runTool' } } as never;
  const execute = (deps: Parameters<typeof carriedEventsInterceptor>[0], args: unknown[], next: (input: { args: unknown[] }) => Promise<unknown>) =>
    carriedEventsInterceptor(deps)(ctx).inbound!.execute!({ args, headers: {} }, next as never);

  it('publishes what a call carries while the activity runs, hands the activity its own arguments, and says how far it published', async () => {
    initTracing('orchestrator', {});
    const { bus, sent } = fakeBus();
    const seen: unknown[][] = [];
    const result = await execute({ bus, topicPrefix: '', signer: new EventSigner(key) }, [{ tool: 'grep' }, { [CARRIED_EVENTS_KEY]: [event(3), event(4)] }], async (input) => {
      seen.push(input.args);
      return { output: 'found' };
    });
    expect(sent.map((m) => m.headers?.seq)).toEqual(['3', '4']);
    expect(seen).toEqual([[{ tool: 'grep' }]]);
    expect(result).toEqual({ [CARRIED_RESULT_KEY]: 4, value: { output: 'found' } });
    for (const message of sent) expect(new EventVerifier([key]).verify(Buffer.from(message.value), message.headers)).toEqual({ ok: true, kid: 'k1' });
  });

  it('runs the activity anyway when Kafka refuses, and answers plainly so the workflow sends the events again', async () => {
    initTracing('orchestrator', {});
    const bus = { send: async () => Promise.reject(new Error('broker away')) } as unknown as KafkaBus;
    const failures = processMetrics().runEventPublishing().failures;
    const before = (await failures.get()).values.reduce((n, v) => n + v.value, 0);
    const result = await execute({ bus, topicPrefix: '', signer: new EventSigner(key) }, [{ tool: 'grep' }, { [CARRIED_EVENTS_KEY]: [event(5)] }], async () => 'ran');
    expect(result).toBe('ran');
    expect((await failures.get()).values.reduce((n, v) => n + v.value, 0)).toBe(before + 1);
  });

  it('answers only once the send has settled, even when the activity finishes first', async () => {
    let acked!: () => void;
    const order: string[] = [];
    const bus = {
      send: () =>
        new Promise<void>((resolve) => {
          acked = () => {
            order.push('acked');
            resolve();
          };
        }),
    } as unknown as KafkaBus;
    const answer = execute({ bus, topicPrefix: '', signer: new EventSigner(key) }, [{ tool: 'embed' }, { [CARRIED_EVENTS_KEY]: [event(7)] }], async () => {
      order.push('ran');
      return 'embedded';
    }).then((r) => {
      order.push('answered');
      return r;
    });
    // The activity ran while the send was still waiting for its ack.
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual(['ran']);
    acked();
    await expect(answer).resolves.toEqual({ [CARRIED_RESULT_KEY]: 7, value: 'embedded' });
    expect(order).toEqual(['ran', 'acked', 'answered']);
  });

  it('fails as the activity failed, after its send has settled', async () => {
    const { bus, sent } = fakeBus();
    await expect(
      execute({ bus, topicPrefix: '', signer: new EventSigner(key) }, [{ tool: 'embed' }, { [CARRIED_EVENTS_KEY]: [event(8)] }], async () => {
        throw new Error('tool broke');
      }),
    ).rejects.toThrow('tool broke');
    expect(sent.map((m) => m.headers?.seq)).toEqual(['8']);
  });

  it('passes a call that carries nothing through untouched', async () => {
    const { bus, sent } = fakeBus();
    const args = [{ tool: 'grep' }];
    const result = await execute({ bus, topicPrefix: '', signer: new EventSigner(key) }, args, async (input) => {
      expect(input.args).toBe(args);
      return 'plain';
    });
    expect(result).toBe('plain');
    expect(sent).toEqual([]);
  });
});
