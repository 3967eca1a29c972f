import { defaultPayloadConverter } from '@temporalio/common';
import { carriesTrace } from './workflow-tracing.interceptors';

describe('carriesTrace', () => {
  const header = (carrier: unknown) => ({ '_tracer-data': defaultPayloadConverter.toPayload(carrier) });

  it('traces an execution whose start carried a traceparent, and none other', () => {
    expect(carriesTrace(header({ traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' }))).toBe(true);
    // What the client interceptor writes outside a trace, what histories before tracing have, and junk.
    expect(carriesTrace(header({}))).toBe(false);
    expect(carriesTrace({})).toBe(false);
    expect(carriesTrace(undefined)).toBe(false);
    expect(carriesTrace({ '_tracer-data': { metadata: { encoding: Buffer.from('binary/plain') }, data: Buffer.from([1, 2]) } })).toBe(false);
  });
});
