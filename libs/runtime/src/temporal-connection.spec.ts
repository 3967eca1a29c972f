import { loadConfig, temporalSpec, type TemporalConfig } from '@agentrun/config';
import {
  checkTemporalNamespace,
  searchAttributeCommands,
  searchAttributeProblems,
  temporalConnectionOptions,
  TemporalStartupError,
  type TemporalServices,
} from './temporal-connection';

const files: Record<string, string> = { '/certs/ca.pem': 'CA', '/certs/client.pem': 'CRT', '/certs/client.key': 'KEY' };
const read = (path: string): Buffer => {
  if (!(path in files)) throw Object.assign(new Error('absent'), { code: 'ENOENT' });
  return Buffer.from(files[path]);
};

function config(overrides: Partial<TemporalConfig> = {}): TemporalConfig {
  return { ...loadConfig(temporalSpec, {}), ...overrides };
}

describe('the Temporal connection options', () => {
  it('are plaintext to the local server by default', () => {
    expect(temporalConnectionOptions(config(), read)).toEqual({ address: '127.0.0.1:7233', namespace: 'default' });
  });

  it('turn TLS on with the system roots when only TEMPORAL_TLS is set', () => {
    expect(temporalConnectionOptions(config({ TEMPORAL_TLS: true }), read).tls).toEqual({});
  });

  it('carry the server CA and the server name, which alone imply TLS', () => {
    const options = temporalConnectionOptions(config({ TEMPORAL_TLS_SERVER_CA_CERT_PATH: '/certs/ca.pem', TEMPORAL_TLS_SERVER_NAME: 'temporal.internal' }), read);
    expect(options.tls).toEqual({ serverRootCACertificate: Buffer.from('CA'), serverNameOverride: 'temporal.internal' });
  });

  it('carry a client certificate pair for mTLS', () => {
    const options = temporalConnectionOptions(
      config({ TEMPORAL_TLS_CLIENT_CERT_PATH: '/certs/client.pem', TEMPORAL_TLS_CLIENT_KEY_PATH: '/certs/client.key' }),
      read,
    );
    expect(options.tls).toEqual({ clientCertPair: { crt: Buffer.from('CRT'), key: Buffer.from('KEY') } });
    expect(options.apiKey).toBeUndefined();
  });

  it('send an API key over TLS with the namespace as temporal-namespace metadata', () => {
    const options = temporalConnectionOptions(config({ TEMPORAL_ADDRESS: 'eu-west-1.aws.api.temporal.io:7233', TEMPORAL_NAMESPACE: 'prod.acct', TEMPORAL_API_KEY: 'k' }), read);
    expect(options).toEqual({
      address: 'eu-west-1.aws.api.temporal.io:7233',
      namespace: 'prod.acct',
      tls: {},
      apiKey: 'k',
      metadata: { 'temporal-namespace': 'prod.acct' },
    });
  });

  it('keep an explicit TEMPORAL_TLS=false with an API key (a plaintext server behind a proxy)', () => {
    expect(temporalConnectionOptions(config({ TEMPORAL_TLS: false, TEMPORAL_API_KEY: 'k' }), read).tls).toBeUndefined();
  });

  it('refuse half a client pair, TLS files with TEMPORAL_TLS=false, and an unreadable file, naming the setting', () => {
    expect(() => temporalConnectionOptions(config({ TEMPORAL_TLS_CLIENT_CERT_PATH: '/certs/client.pem' }), read)).toThrow(
      'TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH go together',
    );
    expect(() => temporalConnectionOptions(config({ TEMPORAL_TLS: false, TEMPORAL_TLS_SERVER_CA_CERT_PATH: '/certs/ca.pem' }), read)).toThrow(
      'TEMPORAL_TLS=false contradicts TEMPORAL_TLS_SERVER_CA_CERT_PATH',
    );
    expect(() => temporalConnectionOptions(config({ TEMPORAL_TLS_SERVER_CA_CERT_PATH: '/certs/gone.pem' }), read)).toThrow(
      'TEMPORAL_TLS_SERVER_CA_CERT_PATH: cannot read /certs/gone.pem: ENOENT',
    );
  });
});

describe('the search attribute check', () => {
  const required = { AgentStatus: 'Keyword', CurrentStep: 'Int', Owner: 'Keyword' } as const;

  it('finds the attributes that are missing or have another type', () => {
    expect(searchAttributeProblems({ AgentStatus: 2, CurrentStep: 3, Owner: 2 }, required)).toEqual([]);
    expect(searchAttributeProblems({ AgentStatus: 2, CurrentStep: 1 }, required)).toEqual([
      { name: 'CurrentStep', type: 'Int', actual: 'Text' },
      { name: 'Owner', type: 'Keyword' },
    ]);
  });

  it('gives one CLI command per attribute, and the tcld one for a Temporal Cloud address', () => {
    const missing = [{ name: 'Owner', type: 'Keyword' as const }, { name: 'CurrentStep', type: 'Int' as const }, { name: 'Org', type: 'Keyword' as const }];
    expect(searchAttributeCommands('default', missing, '127.0.0.1:7233')).toEqual([
      'temporal operator search-attribute create --address 127.0.0.1:7233 --namespace default --name Owner --type Keyword',
      'temporal operator search-attribute create --address 127.0.0.1:7233 --namespace default --name CurrentStep --type Int',
      'temporal operator search-attribute create --address 127.0.0.1:7233 --namespace default --name Org --type Keyword',
    ]);
    expect(searchAttributeCommands('prod.acct', missing, 'prod.acct.tmprl.cloud:7233')[3]).toBe(
      'tcld namespace search-attributes add --namespace prod.acct --search-attribute Owner=Keyword --search-attribute CurrentStep=Int --search-attribute Org=Keyword',
    );
  });

  function services(attributes: Record<string, number> | Error): TemporalServices {
    return {
      withDeadline: (_deadline, fn) => fn(),
      workflowService: {
        describeNamespace: async () => {
          if (attributes instanceof Error) throw attributes;
          return {} as never;
        },
      },
      operatorService: { listSearchAttributes: async () => ({ customAttributes: attributes as Record<string, number> }) as never },
    };
  }
  const where = { address: '127.0.0.1:7233', namespace: 'ns1' };

  it('passes a namespace that has every attribute', async () => {
    await expect(checkTemporalNamespace(services({ AgentStatus: 2, CurrentStep: 3, Owner: 2 }), where, required)).resolves.toBeUndefined();
  });

  it('with no attributes required (the check turned off) still checks the namespace but lists nothing', async () => {
    const listing = services({});
    const list = jest.spyOn(listing.operatorService, 'listSearchAttributes');
    await expect(checkTemporalNamespace(listing, where, {})).resolves.toBeUndefined();
    expect(list).not.toHaveBeenCalled();
    const notFound = Object.assign(new Error('5 NOT_FOUND'), { code: 5 });
    await expect(checkTemporalNamespace(services(notFound), where, {})).rejects.toThrow("Temporal namespace 'ns1' does not exist");
  });

  it('lists the missing attributes and the command that creates them in one message', async () => {
    const err = await checkTemporalNamespace(services({ AgentStatus: 2 }), where, required).catch((e: Error) => e);
    expect(err).toBeInstanceOf(TemporalStartupError);
    expect((err as Error).message).toContain("Temporal namespace 'ns1' at 127.0.0.1:7233 lacks search attributes the workflows set:\n  missing: CurrentStep (Int), Owner (Keyword)");
    expect((err as Error).message).toContain(
      'create them with:\n  temporal operator search-attribute create --address 127.0.0.1:7233 --namespace ns1 --name CurrentStep --type Int\n  temporal operator search-attribute create --address 127.0.0.1:7233 --namespace ns1 --name Owner --type Keyword',
    );
  });

  it('says how to create a namespace that does not exist, and which credential a refusal points at', async () => {
    const notFound = Object.assign(new Error('5 NOT_FOUND: Namespace ns1 is not found.'), { code: 5 });
    await expect(checkTemporalNamespace(services(notFound), where, required)).rejects.toThrow(
      "Temporal namespace 'ns1' does not exist at 127.0.0.1:7233 (TEMPORAL_NAMESPACE): create it with `temporal operator namespace create --address 127.0.0.1:7233 --namespace ns1`",
    );
    const refused = Object.assign(new Error('16 UNAUTHENTICATED: bad key'), { code: 16 });
    await expect(checkTemporalNamespace(services(refused), { ...where, apiKey: 'k' }, required)).rejects.toThrow(/refused this client .* check TEMPORAL_API_KEY/);
  });
});
