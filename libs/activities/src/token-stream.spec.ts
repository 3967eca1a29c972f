import type { RunTokenDelta } from '@agentrun/contracts';
import { TokenStream } from './token-stream';

const of = { org: 'acme', run_id: 'r1', step: 3, attempt: 2 };

/** A sink whose sends resolve only when the test says so. */
function heldSink() {
  const sends: { deltas: RunTokenDelta[]; done: () => void; fail: (err: Error) => void }[] = [];
  return {
    sends,
    sink: {
      send: (deltas: RunTokenDelta[]) => new Promise<void>((resolve, reject) => sends.push({ deltas, done: resolve, fail: reject })),
    },
  };
}

describe('TokenStream', () => {
  it('numbers deltas from 0, sends the first at once and batches what comes while a send is out', async () => {
    const { sends, sink } = heldSink();
    const stream = new TokenStream(sink, of, () => undefined);
    stream.push('Hel');
    stream.push('lo');
    stream.push(' world');
    expect(sends.map((s) => s.deltas.map((d) => d.delta))).toEqual([['Hel']]);
    sends[0].done();
    await new Promise((resolve) => setImmediate(resolve));
    expect(sends.map((s) => s.deltas.map((d) => d.delta))).toEqual([['Hel'], ['lo', ' world']]);
    sends[1].done();
    await stream.close();
    expect(sends.flatMap((s) => s.deltas)).toEqual([
      { ...of, index: 0, delta: 'Hel' },
      { ...of, index: 1, delta: 'lo' },
      { ...of, index: 2, delta: ' world' },
    ]);
  });

  it('skips empty deltas', async () => {
    const sent: RunTokenDelta[] = [];
    const stream = new TokenStream({ send: async (d) => void sent.push(...d) }, of, () => undefined);
    stream.push('');
    stream.push('a');
    await stream.close();
    expect(sent.map((d) => [d.index, d.delta])).toEqual([[0, 'a']]);
    expect(stream.count).toBe(1);
  });

  it('a failed send is reported and dropped; later deltas still go and close never rejects', async () => {
    const { sends, sink } = heldSink();
    const errors: unknown[] = [];
    const stream = new TokenStream(sink, of, (err, dropped) => errors.push([err, dropped]));
    stream.push('a');
    stream.push('b');
    sends[0].fail(new Error('broker gone'));
    await new Promise((resolve) => setImmediate(resolve));
    sends[1].done();
    await expect(stream.close()).resolves.toBeUndefined();
    expect(errors).toEqual([[new Error('broker gone'), 1]]);
    expect(sends[1].deltas.map((d) => d.index)).toEqual([1]);
  });

  it('close with nothing pushed resolves at once', async () => {
    await expect(new TokenStream({ send: async () => undefined }, of, () => undefined).close()).resolves.toBeUndefined();
  });
});
