import type { CallHandler, ExecutionContext } from '@nestjs/common';
import { currentLogContext } from '@agentrun/telemetry';
import { defer, firstValueFrom, of } from 'rxjs';
import { LogContextInterceptor } from './log-context.interceptor';

function http(req: Record<string, unknown>): ExecutionContext {
  return { getType: () => 'http', switchToHttp: () => ({ getRequest: () => req }) } as unknown as ExecutionContext;
}

/** A handler that answers with the log context it ran in (run lazily, as Nest's are). */
const handler: CallHandler = { handle: () => defer(() => of(currentLogContext())) };

describe('LogContextInterceptor', () => {
  const interceptor = new LogContextInterceptor();

  it("runs a /runs/:id handler in the run's context, with the org OrgGuard authenticated", async () => {
    const seen = await firstValueFrom(interceptor.intercept(http({ path: '/runs/r-1/events', params: { id: 'r-1' }, org: 'acme' }), handler));
    expect(seen).toEqual({ org: 'acme', run_id: 'r-1' });
  });

  it('leaves other routes, and requests without an org, without a run', async () => {
    expect(await firstValueFrom(interceptor.intercept(http({ path: '/runs', params: {}, org: 'acme' }), handler))).toEqual({});
    expect(await firstValueFrom(interceptor.intercept(http({ path: '/datasets/x', params: { id: 'x' }, org: 'acme' }), handler))).toEqual({});
    expect(await firstValueFrom(interceptor.intercept(http({ path: '/runs/r-1', params: { id: 'r-1' } }), handler))).toEqual({});
  });
});
