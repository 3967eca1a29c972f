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
