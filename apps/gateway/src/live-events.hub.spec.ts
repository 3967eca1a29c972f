import { parseQuotas } from '@agentrun/config';
import type { ReadModel } from '@agentrun/persistence';
import type { GatewayConfig } from './config';
import { LiveEventsHub } from './live-events.hub';

function hub(maxStreams: number): LiveEventsHub {
  const config = { AGENTRUN_QUOTAS: parseQuotas('{"orgs": {"acme": {"sse_streams": 2}}}'), GATEWAY_SSE_MAX_STREAMS: maxStreams } as unknown as GatewayConfig;
  return new LiveEventsHub(config, {} as ReadModel);
}

describe('LiveEventsHub stream admission', () => {
  it("refuses the org's stream past its sse_streams with a 429, and a released slot is taken again", () => {
    const h = hub(100);
    const a = h.admit('acme');
    const b = h.admit('acme');
    expect(h.admit('acme')).toEqual({ status: 429, detail: 'org acme holds 2 open streams, its limit (sse_streams in AGENTRUN_QUOTAS) is 2: close one first' });
    // Another org has its own count (the default, 20).
    expect(h.admit('other')).toHaveProperty('release');
    if (!('release' in a) || !('release' in b)) throw new Error('expected both admitted');
    a.release();
    a.release();
    expect(h.admit('acme')).toHaveProperty('release');
    // Released twice, counted once: the org is full again.
    expect(h.admit('acme')).toMatchObject({ status: 429 });
  });

  it('refuses any stream past GATEWAY_SSE_MAX_STREAMS with a 503, whichever org asks', () => {
    const h = hub(3);
    for (const org of ['a', 'b', 'c']) expect(h.admit(org)).toHaveProperty('release');
    expect(h.admit('d')).toEqual({ status: 503, detail: 'this gateway holds its limit of 3 open streams (GATEWAY_SSE_MAX_STREAMS); retry later' });
  });
});

describe('LiveEventsHub notices', () => {
  it('reads every run one notice touches in one batched query, each stream getting its own run only', async () => {
    const calls: { reads: { org: string; runId: string; after: number }[]; limit: number }[] = [];
    const readModel = {
      eachEventsAfter: async (reads: { org: string; runId: string; after: number }[], limit: number, each: (i: number, events: unknown[]) => void) => {
        calls.push({ reads, limit });
        reads.forEach((r, i) => each(i, [{ seq: r.after + 1, event: { org: r.org, run_id: r.runId, seq: r.after + 1 }, traceparent: null }]));
      },
    } as unknown as ReadModel;
    const config = { AGENTRUN_QUOTAS: parseQuotas(undefined), GATEWAY_SSE_MAX_STREAMS: 10 } as unknown as GatewayConfig;
    const h = new LiveEventsHub(config, readModel);
    const got: string[] = [];
    for (const [org, run, cursor] of [['acme', 'a', 3], ['acme', 'b', 0], ['globex', 'a', 7]] as const) {
      h.subscribe(org, run, {
        cursor: () => cursor,
        deliver: (events) => got.push(...events.map(({ event: e }) => `${org}/${run}:${e.org}/${e.run_id}/${e.seq}`)),
        wake: () => undefined,
        fail: (err) => {
          throw err;
        },
      });
    }
    const dispatch = (payload: string) => (h as unknown as { dispatch(p: string): void }).dispatch(payload);
    dispatch(JSON.stringify([['acme', 'a', 4], ['acme', 'b', 1], ['globex', 'a', 8], ['acme', 'nobody-watches', 2]]));
    await new Promise((r) => setImmediate(r));
    expect(calls).toEqual([
      {
        reads: [
          { org: 'acme', runId: 'a', after: 3, afterApplied: false },
          { org: 'acme', runId: 'b', after: 0, afterApplied: false },
          { org: 'globex', runId: 'a', after: 7, afterApplied: false },
        ],
        limit: 500,
      },
    ]);
    expect(got).toEqual(['acme/a:acme/a/4', 'acme/b:acme/b/1', 'globex/a:globex/a/8']);
    // `*`: every run with a stream, again in one query.
    dispatch('*');
    await new Promise((r) => setImmediate(r));
    expect(calls).toHaveLength(2);
    expect(calls[1].reads.map((r) => `${r.org}/${r.runId}`)).toEqual(['acme/a', 'acme/b', 'globex/a']);
  });
});
