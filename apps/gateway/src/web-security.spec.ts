import express from 'express';
import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { loadGatewayConfig } from './config';
import { allowedHostNames, fromOwnOrigin, hostAllowList, hostOfHeader } from './web-security';

/** A raw request, so the Host header is exactly what the test says (fetch sets its own). */
function send(port: number, method: string, path: string, headers: Record<string, string>): Promise<{ status: number; body: string; type?: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers, setHost: !('Host' in headers) }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, type: res.headers['content-type'] }));
    });
    req.on('error', reject);
    req.end();
  });
}

async function listen(app: express.Express): Promise<{ server: Server; port: number }> {
  return new Promise((resolve) => {
    const server = app.listen(0, '127.0.0.1', () => resolve({ server, port: (server.address() as AddressInfo).port }));
  });
}

describe('the Host allow-list', () => {
  it('reads the name of a Host header, with or without a port, and nothing malformed', () => {
    expect(hostOfHeader('127.0.0.1:8080')).toBe('127.0.0.1');
    expect(hostOfHeader('LocalHost')).toBe('localhost');
    expect(hostOfHeader('[::1]:8080')).toBe('[::1]');
    expect(hostOfHeader('agentrun.example.com.')).toBe('agentrun.example.com');
    expect(hostOfHeader('rebind.attacker.test:8080')).toBe('rebind.attacker.test');
    for (const bad of [undefined, '', '::1', 'a b', 'host:port', 'host:', 'user@host', 'localhost:8080:1', '[::1']) expect({ bad, name: hostOfHeader(bad) }).toEqual({ bad, name: undefined });
  });

  it('is the loopback names in local mode, and only the configured names in production, which refuses to start without one', () => {
    expect([...allowedHostNames(loadGatewayConfig({}))].sort()).toEqual(['127.0.0.1', '[::1]', 'localhost']);
    expect([...allowedHostNames(loadGatewayConfig({ GATEWAY_ALLOWED_HOSTS: 'dev.example.test' }))].sort()).toEqual(['127.0.0.1', '[::1]', 'dev.example.test', 'localhost']);
    const production = { AGENTRUN_MODE: 'production', CURSOR_SECRET: 'c'.repeat(32), DATABASE_URL: 'postgres://u:p@db/x', GATEWAY_HOST: '0.0.0.0' };
    expect(() => loadGatewayConfig(production)).toThrow(/GATEWAY_ALLOWED_HOSTS is empty; production mode needs the host names/);
    const config = loadGatewayConfig({ ...production, GATEWAY_ALLOWED_HOSTS: ' AgentRun.Example.com, 10.0.0.5 ,[::1]' });
    expect([...allowedHostNames(config)]).toEqual(['agentrun.example.com', '10.0.0.5', '[::1]']);
    expect(() => loadGatewayConfig({ ...production, GATEWAY_ALLOWED_HOSTS: 'agentrun.example.com:443,https://x.test,*' })).toThrow(
      /GATEWAY_ALLOWED_HOSTS must list host names .* not 'agentrun.example.com:443', 'https:\/\/x.test', '\*'/,
    );
  });

  describe('as middleware', () => {
    let server: Server;
    let port: number;
    beforeAll(async () => {
      const app = express();
      app.use(hostAllowList(allowedHostNames(loadGatewayConfig({}))));
      app.use((_req: express.Request, res: express.Response) => void res.json({ reached: true }));
      ({ server, port } = await listen(app));
    });
    afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

    it('answers 421, naming neither host, for a name it does not answer for; the route never runs', async () => {
      for (const [method, host] of [
        ['GET', 'rebind.attacker.test:8080'],
        ['POST', 'rebind.attacker.test'],
        ['GET', '127.0.0.1.attacker.test'],
        ['GET', 'localhost.attacker.test:8080'],
      ]) {
        const res = await send(port, method, '/runs', { Host: host, 'X-Org': 'demo' });
        expect({ host, status: res.status, type: res.type }).toEqual({ host, status: 421, type: expect.stringMatching(/^application\/problem\+json/) });
        expect(JSON.parse(res.body)).toMatchObject({ title: 'misdirected request', status: 421 });
        expect(res.body).not.toMatch(/attacker|localhost|127\.0\.0\.1|reached/);
      }
    });

    it('passes the loopback names under any port, and leaves the health routes and /metrics to probes and scrapers that name the pod', async () => {
      for (const host of ['127.0.0.1:8080', 'localhost:1', '[::1]:8080', 'LOCALHOST', '127.0.0.1']) {
        expect({ host, status: (await send(port, 'GET', '/runs', { Host: host })).status }).toEqual({ host, status: 200 });
      }
      for (const path of ['/livez', '/readyz', '/metrics']) expect((await send(port, 'GET', path, { Host: '10.1.2.3:8080' })).status).toBe(200);
      expect((await send(port, 'GET', '/readyz/x', { Host: '10.1.2.3:8080' })).status).toBe(421);
      expect((await send(port, 'GET', '/metrics/x', { Host: '10.1.2.3:8080' })).status).toBe(421);
    });
  });
});

describe("a write's origin", () => {
  async function originApp(trustProxy: boolean): Promise<{ server: Server; port: number }> {
    const app = express();
    if (trustProxy) app.set('trust proxy', true);
    app.use((req: express.Request, res: express.Response) => void res.json({ own: fromOwnOrigin(req) }));
    return listen(app);
  }
  const own = async (port: number, headers: Record<string, string>): Promise<boolean> => JSON.parse((await send(port, 'POST', '/runs/r-1/pause', headers)).body).own;

  it("is the gateway's own when Origin is its scheme, host and port, or, without Origin, when Sec-Fetch-Site says same-origin", async () => {
    const { server, port } = await originApp(false);
    try {
      const host = `127.0.0.1:${port}`;
      expect(await own(port, { Host: host, Origin: `http://${host}` })).toBe(true);
      expect(await own(port, { Host: host, Origin: `HTTP://127.0.0.1:${port}` })).toBe(true);
      expect(await own(port, { Host: host, 'Sec-Fetch-Site': 'same-origin' })).toBe(true);
      // The finding: another port on the same host is the same site, so SameSite=Strict let its cookie through.
      expect(await own(port, { Host: host, Origin: 'http://127.0.0.1:9999' })).toBe(false);
      expect(await own(port, { Host: host, Origin: `https://${host}` })).toBe(false);
      expect(await own(port, { Host: host, Origin: `http://localhost:${port}` })).toBe(false);
      expect(await own(port, { Host: host, Origin: 'null' })).toBe(false);
      expect(await own(port, { Host: host, Origin: 'http://127.0.0.1:9999', 'Sec-Fetch-Site': 'same-origin' })).toBe(false);
      expect(await own(port, { Host: host, 'Sec-Fetch-Site': 'same-site' })).toBe(false);
      expect(await own(port, { Host: host })).toBe(false);
    } finally {
      server.close();
    }
  });

  it("takes the scheme from X-Forwarded-Proto only behind a trusted proxy (GATEWAY_TRUST_PROXY)", async () => {
    const direct = await originApp(false);
    const proxied = await originApp(true);
    try {
      const headers = { Host: 'agentrun.example.com', Origin: 'https://agentrun.example.com', 'X-Forwarded-Proto': 'https' };
      expect(await own(direct.port, headers)).toBe(false);
      expect(await own(proxied.port, headers)).toBe(true);
      expect(await own(proxied.port, { ...headers, Origin: 'http://agentrun.example.com' })).toBe(false);
    } finally {
      direct.server.close();
      proxied.server.close();
    }
  });
});
