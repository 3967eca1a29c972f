import type { RunEventEnvelope } from '@agentrun/contracts';
import { EventSigner, type KafkaBus, type OutboundMessage } from '@agentrun/kafka';
import { initTracing, resetTracingForTests } from '@agentrun/telemetry';
import { CARRIED_EVENTS_KEY } from '@agentrun/workflows';
import { StalledCarriers, type CarrierReader, type WatchedExecution } from './stalled-carriers';

const key = { kid: 'k1', secret: Buffer.from('a-secret-of-at-least-thirty-two-bytes!!') };
const run: WatchedExecution = { workflowId: 'acme/r1', runId: 'e1' };

function event(seq: number): RunEventEnvelope {
  return { org: 'acme', run_id: 'r1', seq, type: 'step_completed', ts: '2026-01-01T00:00:00.000Z', kind: 'agent', payload: {} } as unknown as RunEventEnvelope;
}

/** What Temporal would say: the queued activity ids, and each scheduled activity's arguments by id. */
function fakeReader(state: { queued: string[]; args: Record<string, unknown[]>; fail?: Error }) {
  const looks: string[] = [];
  const reader: CarrierReader = {
    async queuedActivities(execution) {
      looks.push(execution.workflowId);
      if (state.fail) throw state.fail;
      return state.queued;
    },
    async scheduledArguments(_execution, ids) {
      return Object.entries(state.args).filter(([id]) => ids.has(id)).map(([, args]) => args);
    },
  };
  return { reader, looks };
}

function watchWith(reader: CarrierReader) {
  const sent: OutboundMessage[] = [];
  const bus = { send: async (_topic: string, messages: OutboundMessage[]) => void sent.push(...messages) } as unknown as KafkaBus;
  const log: string[] = [];
  const watch = new StalledCarriers({ bus, topicPrefix: '', signer: new EventSigner(key) }, { afterMs: 1_000, log: (m) => log.push(m) });
  watch.attach(reader);
  return { watch, sent, log };
}

/** Runs the timers due within `ms`, then lets the look they started finish. */
async function after(ms: number): Promise<void> {
  await jest.advanceTimersByTimeAsync(ms);
}

beforeEach(() => {
  jest.useFakeTimers();
  initTracing('orchestrator', {});
});
afterEach(async () => {
  jest.useRealTimers();
  await resetTracingForTests();
});

describe('StalledCarriers (the watch on carried calls)', () => {
  it('publishes the events of a carrier still queued after the wait, read from its scheduled arguments, once', async () => {
    const { reader, looks } = fakeReader({ queued: ['7'], args: { '5': ['search', { [CARRIED_EVENTS_KEY]: [event(3)] }], '7': ['embed', { [CARRIED_EVENTS_KEY]: [event(4), event(5)] }] } });
    const { watch, sent, log } = watchWith(reader);
    watch.carrying(run);
    await after(999);
    expect(looks).toEqual([]);
    await after(1);
    // Only the queued call's events (the other one started: its worker publishes its own).
    expect(sent.map((m) => m.headers?.seq)).toEqual(['4', '5']);
    expect(log[0]).toMatch(/acme\/r1's run events 4\.\.5: the call carrying them had not started after 1000 ms/);
    // One look per stretch: still outstanding, but not looked at again until another carrier.
    await after(5_000);
    expect(looks).toHaveLength(1);
    watch.carrying(run);
    await after(1_000);
    expect(looks).toHaveLength(2);
  });

  it('does not look at a run whose carriers all landed in time', async () => {
    const { reader, looks } = fakeReader({ queued: [], args: {} });
    const { watch } = watchWith(reader);
    watch.carrying(run);
    watch.carrying(run);
    watch.landed(run);
    expect(watch.size).toBe(1);
    watch.landed(run);
    expect(watch.size).toBe(0);
    await after(2_000);
    expect(looks).toEqual([]);
  });

  it('publishes nothing when the queued activities carry no events, and ignores a landing it never saw scheduled', async () => {
    const { reader, looks } = fakeReader({ queued: ['3'], args: { '3': ['search'] } });
    const { watch, sent } = watchWith(reader);
    watch.landed(run);
    watch.carrying(run);
    await after(1_000);
    expect(looks).toHaveLength(1);
    expect(sent).toEqual([]);
  });

  it('looks again after a look that failed, and not at all once stopped', async () => {
    const state: { queued: string[]; args: Record<string, unknown[]>; fail?: Error } = { queued: ['2'], args: { '2': ['embed', { [CARRIED_EVENTS_KEY]: [event(2)] }] }, fail: new Error('temporal away') };
    const { reader, looks } = fakeReader(state);
    const { watch, sent, log } = watchWith(reader);
    watch.carrying(run);
    await after(1_000);
    expect(log[0]).toMatch(/could not look at acme\/r1's carried calls \(tried again\): temporal away/);
    state.fail = undefined;
    await after(1_000);
    expect(looks).toHaveLength(2);
    expect(sent.map((m) => m.headers?.seq)).toEqual(['2']);
    await watch.stop();
    watch.carrying(run);
    await after(5_000);
    expect(looks).toHaveLength(2);
  });

  it('waits for its reader: a carrier reported before the workers connected is looked at once they have', async () => {
    const { reader, looks } = fakeReader({ queued: [], args: {} });
    const sentNothing: OutboundMessage[] = [];
    const bus = { send: async (_t: string, m: OutboundMessage[]) => void sentNothing.push(...m) } as unknown as KafkaBus;
    const watch = new StalledCarriers({ bus, topicPrefix: '', signer: new EventSigner(key) }, { afterMs: 1_000 });
    watch.carrying(run);
    await after(1_000);
    watch.attach(reader);
    await after(1_000);
    expect(looks).toHaveLength(1);
  });
});
