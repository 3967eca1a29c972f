import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { kafkaClientSecurity, KafkaSecurityError, oauthBearerTokenProvider, type KafkaSecuritySettings } from './security';

const files: Record<string, string> = { '/ca.pem': 'CA', '/cert.pem': 'CERT', '/key.pem': 'KEY' };
const reads: string[] = [];
const readFile = (path: string): Buffer => {
  reads.push(path);
  return Buffer.from(files[path]);
};
const security = (settings: Partial<KafkaSecuritySettings>) =>
  kafkaClientSecurity({ KAFKA_SECURITY_PROTOCOL: 'PLAINTEXT', ...settings }, { readFile });

beforeEach(() => (reads.length = 0));

describe('kafkaClientSecurity', () => {
  it('adds nothing for PLAINTEXT', () => {
    expect(security({})).toEqual({});
  });

  it('turns TLS on for SSL, trusting the system CAs without a CA file', () => {
    expect(security({ KAFKA_SECURITY_PROTOCOL: 'SSL' })).toEqual({ ssl: true });
  });

  it('reads the CA bundle and the client certificate and key once, for mTLS', () => {
    const result = security({
      KAFKA_SECURITY_PROTOCOL: 'SSL',
      KAFKA_SSL_CA_FILE: '/ca.pem',
      KAFKA_SSL_CERT_FILE: '/cert.pem',
      KAFKA_SSL_KEY_FILE: '/key.pem',
      KAFKA_SSL_KEY_PASSWORD: 'pw',
    });
    expect(result.sasl).toBeUndefined();
    expect(result.ssl).toEqual({ ca: [Buffer.from('CA')], cert: Buffer.from('CERT'), key: Buffer.from('KEY'), passphrase: 'pw' });
    expect(reads.sort()).toEqual(['/ca.pem', '/cert.pem', '/key.pem']);
  });

  it.each([
    ['PLAIN', 'plain'],
    ['SCRAM-SHA-256', 'scram-sha-256'],
    ['SCRAM-SHA-512', 'scram-sha-512'],
  ] as const)('maps SASL_SSL with %s to the client mechanism %s, over TLS', (mechanism, clientMechanism) => {
    const result = security({ KAFKA_SECURITY_PROTOCOL: 'SASL_SSL', KAFKA_SASL_MECHANISM: mechanism, KAFKA_SASL_USERNAME: 'svc', KAFKA_SASL_PASSWORD: 'secret', KAFKA_SSL_CA_FILE: '/ca.pem' });
    expect(result).toEqual({ ssl: { ca: [Buffer.from('CA')] }, sasl: { mechanism: clientMechanism, username: 'svc', password: 'secret' } });
  });

  it('keeps SASL_PLAINTEXT off TLS', () => {
    const result = security({ KAFKA_SECURITY_PROTOCOL: 'SASL_PLAINTEXT', KAFKA_SASL_MECHANISM: 'SCRAM-SHA-512', KAFKA_SASL_USERNAME: 'svc', KAFKA_SASL_PASSWORD: 'secret' });
    expect(result.ssl).toBeUndefined();
    expect(result.sasl).toEqual({ mechanism: 'scram-sha-512', username: 'svc', password: 'secret' });
  });

  it('gives OAUTHBEARER a token provider', () => {
    const result = security({
      KAFKA_SECURITY_PROTOCOL: 'SASL_SSL',
      KAFKA_SASL_MECHANISM: 'OAUTHBEARER',
      KAFKA_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL: 'https://idp.example/token',
      KAFKA_SASL_OAUTHBEARER_CLIENT_ID: 'id',
      KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET: 'secret',
    });
    expect(result.ssl).toBe(true);
    expect(result.sasl?.mechanism).toBe('oauthbearer');
    expect(typeof (result.sasl as { oauthBearerProvider: unknown }).oauthBearerProvider).toBe('function');
  });

  it.each<[string, Partial<KafkaSecuritySettings>, string]>([
    ['a SASL protocol without a mechanism', { KAFKA_SECURITY_PROTOCOL: 'SASL_SSL' }, 'KAFKA_SASL_MECHANISM is required when KAFKA_SECURITY_PROTOCOL is SASL_SSL'],
    ['a mechanism without SASL', { KAFKA_SECURITY_PROTOCOL: 'SSL', KAFKA_SASL_MECHANISM: 'PLAIN' }, 'KAFKA_SASL_MECHANISM is set but KAFKA_SECURITY_PROTOCOL is SSL'],
    ['SCRAM without a username', { KAFKA_SECURITY_PROTOCOL: 'SASL_SSL', KAFKA_SASL_MECHANISM: 'SCRAM-SHA-256', KAFKA_SASL_PASSWORD: 'x' }, 'KAFKA_SASL_USERNAME is required when KAFKA_SASL_MECHANISM is SCRAM-SHA-256'],
    ['PLAIN without a password', { KAFKA_SECURITY_PROTOCOL: 'SASL_PLAINTEXT', KAFKA_SASL_MECHANISM: 'PLAIN', KAFKA_SASL_USERNAME: 'u' }, 'KAFKA_SASL_PASSWORD is required when KAFKA_SASL_MECHANISM is PLAIN'],
    ['OAUTHBEARER without a token endpoint', { KAFKA_SECURITY_PROTOCOL: 'SASL_SSL', KAFKA_SASL_MECHANISM: 'OAUTHBEARER' }, 'KAFKA_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL is required when KAFKA_SASL_MECHANISM is OAUTHBEARER'],
    ['a CA file without TLS', { KAFKA_SECURITY_PROTOCOL: 'SASL_PLAINTEXT', KAFKA_SASL_MECHANISM: 'PLAIN', KAFKA_SSL_CA_FILE: '/ca.pem' }, 'KAFKA_SSL_CA_FILE is set but KAFKA_SECURITY_PROTOCOL is SASL_PLAINTEXT'],
    ['a certificate without its key', { KAFKA_SECURITY_PROTOCOL: 'SSL', KAFKA_SSL_CERT_FILE: '/cert.pem' }, 'KAFKA_SSL_KEY_FILE is required when KAFKA_SSL_CERT_FILE is set'],
    ['a key without its certificate', { KAFKA_SECURITY_PROTOCOL: 'SSL', KAFKA_SSL_KEY_FILE: '/key.pem' }, 'KAFKA_SSL_CERT_FILE is required when KAFKA_SSL_KEY_FILE is set'],
    ['a key password without a key', { KAFKA_SECURITY_PROTOCOL: 'SSL', KAFKA_SSL_KEY_PASSWORD: 'pw' }, 'KAFKA_SSL_KEY_PASSWORD is set but KAFKA_SSL_KEY_FILE is not'],
  ])('refuses %s, naming the setting', (_, settings, message) => {
    expect(() => security(settings)).toThrow(KafkaSecurityError);
    expect(() => security(settings)).toThrow(message);
  });
});

describe('the OAUTHBEARER token provider', () => {
  let server: Server;
  let url: string;
  let requests: { authorization?: string; contentType?: string; body: URLSearchParams }[];
  let answer: (n: number) => { status: number; body: string };
  let release: (() => void) | undefined;
  let hold = false;

  const body = (req: IncomingMessage) =>
    new Promise<string>((resolve) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    });

  beforeAll(async () => {
    server = createServer((req, res) => {
      void (async () => {
        requests.push({ authorization: req.headers.authorization, contentType: req.headers['content-type'], body: new URLSearchParams(await body(req)) });
        if (hold) await new Promise<void>((resolve) => (release = resolve));
        const { status, body: text } = answer(requests.length);
        res.writeHead(status, { 'content-type': 'application/json' }).end(text);
      })();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/oauth2/token`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
  beforeEach(() => {
    requests = [];
    hold = false;
    answer = (n) => ({ status: 200, body: JSON.stringify({ access_token: `token-${n}`, token_type: 'Bearer', expires_in: 300 }) });
  });

  it('asks with the client-credentials grant, the client in Basic auth and the scope in the form', async () => {
    const provider = oauthBearerTokenProvider({ tokenEndpointUrl: url, clientId: 'agentrun', clientSecret: 's3cret', scope: 'kafka' });
    await expect(provider()).resolves.toEqual({ value: 'token-1' });
    expect(requests).toHaveLength(1);
    expect(requests[0].authorization).toBe(`Basic ${Buffer.from('agentrun:s3cret').toString('base64')}`);
    expect(requests[0].contentType).toBe('application/x-www-form-urlencoded');
    expect(Object.fromEntries(requests[0].body)).toEqual({ grant_type: 'client_credentials', scope: 'kafka' });
  });

  it('keeps the token until shortly before it expires, then fetches a new one', async () => {
    let now = 1_000_000;
    const provider = oauthBearerTokenProvider({ tokenEndpointUrl: url, clientId: 'a', clientSecret: 'b', now: () => now });
    await expect(provider()).resolves.toEqual({ value: 'token-1' });
    now += 200_000;
    await expect(provider()).resolves.toEqual({ value: 'token-1' });
    expect(requests).toHaveLength(1);
    expect(requests[0].body.has('scope')).toBe(false);
    // 300 s lifetime: renewed a minute early.
    now = 1_000_000 + 240_000;
    await expect(provider()).resolves.toEqual({ value: 'token-2' });
    expect(requests).toHaveLength(2);
  });

  it('lets connections opening together share one request', async () => {
    hold = true;
    const provider = oauthBearerTokenProvider({ tokenEndpointUrl: url, clientId: 'a', clientSecret: 'b' });
    const both = Promise.all([provider(), provider()]);
    await new Promise<void>((resolve) => {
      const poll = () => (release ? resolve() : setImmediate(poll));
      poll();
    });
    release!();
    release = undefined;
    await expect(both).resolves.toEqual([{ value: 'token-1' }, { value: 'token-1' }]);
    expect(requests).toHaveLength(1);
  });

  it('names the setting and the credentials when the endpoint refuses', async () => {
    answer = () => ({ status: 401, body: '{"error":"invalid_client"}' });
    const provider = oauthBearerTokenProvider({ tokenEndpointUrl: url, clientId: 'a', clientSecret: 'wrong' });
    await expect(provider()).rejects.toThrow(`KAFKA_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL (${url}) answered 401: {"error":"invalid_client"}; check KAFKA_SASL_OAUTHBEARER_CLIENT_ID`);
  });

  it('refuses an answer without an access token, and asks again next time', async () => {
    answer = (n) => (n === 1 ? { status: 200, body: '{"token_type":"Bearer"}' } : { status: 200, body: '{"access_token":"late","expires_in":60}' });
    const provider = oauthBearerTokenProvider({ tokenEndpointUrl: url, clientId: 'a', clientSecret: 'b' });
    await expect(provider()).rejects.toThrow('answered without an access_token');
    await expect(provider()).resolves.toEqual({ value: 'late' });
  });

  it('names the setting when the endpoint cannot be reached', async () => {
    const provider = oauthBearerTokenProvider({ tokenEndpointUrl: 'http://127.0.0.1:1/token', clientId: 'a', clientSecret: 'b' });
    await expect(provider()).rejects.toThrow('KAFKA_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL (http://127.0.0.1:1/token) could not be reached');
  });
});
