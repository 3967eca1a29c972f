import type { INestApplication } from '@nestjs/common';
import { Logger } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { CommandService } from '@agentrun/commands';
import { SessionStore, TokenStore } from '@agentrun/persistence';
import { Database, Kafka, Temporal } from '@agentrun/runtime';
import type { AddressInfo } from 'node:net';
import { loadGatewayConfig } from './config';
import { GatewayModule } from './gateway.module';
import { LiveEventsHub } from './live-events.hub';
import { LiveTokensHub } from './live-tokens.hub';

/**
 * The gateway module on the real router, its clients inert: the read model's queries throw (an error
 * nobody planned for), one token is known, and the command service accepts whatever reaches it. What
 * is checked is what the guard and the exception filter answer.
 */
describe('the answers the guard and the exception filter give', () => {
  let app: INestApplication;
  let base: string;
  let origin: string;
  const TOKEN = 'ar_' + 'k'.repeat(43);
  const SESSION = 's'.repeat(43);

  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({ imports: [GatewayModule.forRoot(loadGatewayConfig())] })
      .overrideProvider(Database)
      .useValue({ dataSource: { query: async () => Promise.reject(new Error('relation "runs" does not exist at character 15 (host 10.9.8.7, user agentrun_prod)')) } })
      .overrideProvider(Kafka)
      .useValue({ bus: {}, topicPrefix: '' })
      .overrideProvider(Temporal)
      .useValue({})
      .overrideProvider(LiveEventsHub)
      .useValue({})
      .overrideProvider(LiveTokensHub)
      .useValue({})
      .overrideProvider(TokenStore)
      .useValue({ identify: async (token: string) => (token === TOKEN ? { id: 'tok_1', org: 'acme', subject: null } : undefined) })
      .overrideProvider(SessionStore)
      .useValue({ lookup: async (id: string) => (id === SESSION ? { org: 'acme', subject: null, token_id: 'tok_1' } : undefined) })
      .overrideProvider(CommandService)
      .useValue({ handle: async (c: { command_id: string; run_id: string }) => ({ command_id: c.command_id, run_id: c.run_id, outcome: 'accepted' }) })
      .compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.listen(0, '127.0.0.1');
    origin = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
    base = origin;
  });
  afterAll(async () => {
    await app?.close();
  });

  it('an unexpected error is a 500 with an error id, logged with the detail, and nothing of the error itself', async () => {
    const logged = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    try {
      const res = await fetch(`${base}/runs`, { headers: { 'X-Org': 'acme' } });
      expect(res.status).toBe(500);
      const text = await res.text();
      const body = JSON.parse(text);
      expect(body).toEqual({
        type: 'about:blank',
        title: 'internal server error',
        status: 500,
        detail: `the gateway failed to answer; the error is logged under error id ${body.error_id}`,
        error_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      });
      expect(text).not.toMatch(/relation|10\.9|agentrun_prod/);
      const line = logged.mock.calls.map((c) => String(c[0])).find((l) => l.includes(body.error_id));
      expect(line).toMatch(/relation "runs" does not exist/);
    } finally {
      logged.mockRestore();
    }
  });

  it('a write signed in by the session cookie alone must come from its own origin: 403 from another port of the same host', async () => {
    const post = (headers: Record<string, string>) => fetch(`${base}/runs/run-1/pause`, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: '{}' });
    const cookie = { Cookie: `agentrun_session=${SESSION}` };

    const refused = await post({ ...cookie, Origin: 'http://127.0.0.1:9999' });
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ title: 'cross-origin request', status: 403 });
    expect((await post(cookie)).status).toBe(403);
    expect((await post({ ...cookie, 'Sec-Fetch-Site': 'same-site' })).status).toBe(403);

    expect((await post({ ...cookie, Origin: origin })).status).toBe(202);
    expect((await post({ ...cookie, 'Sec-Fetch-Site': 'same-origin' })).status).toBe(202);
    // A bearer token is the client's own doing, not the browser's: no origin to check.
    expect((await post({ Authorization: `Bearer ${TOKEN}`, Origin: 'http://127.0.0.1:9999' })).status).toBe(202);
    // Reads are not writes, whatever page asks (the browser keeps their answers from another origin).
    const read = await fetch(`${base}/runs/run-1/snapshots/snap-1/archive`, { headers: { ...cookie, Origin: 'http://127.0.0.1:9999' } });
    expect(read.status).not.toBe(403);
  });
});
