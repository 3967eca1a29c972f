import { ConfigError } from './env';
import { isLoopback, loadServiceConfig, localProblems, productionProblems } from './production';
import { databaseSpec, modeSpec } from './platform';
import { secret, str } from './env';

describe('what each mode refuses', () => {
  const spec = { ...modeSpec, ...databaseSpec, CURSOR_SECRET: secret('local-development-cursor-secret'), GATEWAY_HOST: str('127.0.0.1') };

  it('production refuses the development cursor secret and database password, naming the settings', () => {
    const problems = productionProblems({ AGENTRUN_MODE: 'production', CURSOR_SECRET: 'local-development-cursor-secret', DATABASE_URL: 'postgres://agentrun:agentrun@db:5432/agentrun' });
    expect(problems).toHaveLength(2);
    expect(problems[0]).toMatch(/^CURSOR_SECRET is the development default/);
    expect(problems[1]).toMatch(/database password is the development default.*DATABASE_PASSWORD/);
  });

  it('production accepts secrets of its own, and a URL without a password (certificate or IAM auth)', () => {
    expect(productionProblems({ AGENTRUN_MODE: 'production', CURSOR_SECRET: 'x'.repeat(32), DATABASE_URL: 'postgres://agentrun:s3cret@db/agentrun' })).toEqual([]);
    expect(productionProblems({ AGENTRUN_MODE: 'production', DATABASE_URL: 'postgres://agentrun@db/agentrun' })).toEqual([]);
    expect(productionProblems({ AGENTRUN_MODE: 'local', CURSOR_SECRET: 'local-development-cursor-secret' })).toEqual([]);
  });

  it("production refuses a gateway with no allowed host names, and looks at no other service's config for them", () => {
    const gateway = { AGENTRUN_MODE: 'production', CURSOR_SECRET: 'x'.repeat(32), DATABASE_URL: 'postgres://agentrun@db/agentrun' };
    expect(productionProblems({ ...gateway, GATEWAY_ALLOWED_HOSTS: [] })).toEqual([expect.stringMatching(/^GATEWAY_ALLOWED_HOSTS is empty; production mode needs the host names clients reach the gateway by/)]);
    expect(productionProblems({ ...gateway, GATEWAY_ALLOWED_HOSTS: ['agentrun.example.com'] })).toEqual([]);
    expect(productionProblems(gateway)).toEqual([]);
    expect(productionProblems({ AGENTRUN_MODE: 'local', GATEWAY_ALLOWED_HOSTS: [] })).toEqual([]);
  });

  it('production refuses a short command key secret, and allows none (every Kafka command is then refused at the consumer)', () => {
    const orchestrator = { AGENTRUN_MODE: 'production', DATABASE_URL: 'postgres://agentrun@db/agentrun' };
    expect(productionProblems({ ...orchestrator, AGENTRUN_COMMAND_KEY_SECRET: 'short' })).toEqual([expect.stringMatching(/^AGENTRUN_COMMAND_KEY_SECRET is shorter than 32 characters/)]);
    expect(productionProblems({ ...orchestrator, AGENTRUN_COMMAND_KEY_SECRET: 'x'.repeat(32) })).toEqual([]);
    expect(productionProblems({ ...orchestrator, AGENTRUN_COMMAND_KEY_SECRET: undefined })).toEqual([]);
    expect(productionProblems({ AGENTRUN_MODE: 'local', AGENTRUN_COMMAND_KEY_SECRET: 'short' })).toEqual([]);
  });

  it('a database password given apart from the URL is the one checked', () => {
    expect(productionProblems({ AGENTRUN_MODE: 'production', DATABASE_URL: 'postgres://agentrun:agentrun@db/agentrun', DATABASE_PASSWORD: 'other' })).toEqual([]);
    expect(productionProblems({ AGENTRUN_MODE: 'production', DATABASE_URL: 'postgres://agentrun:other@db/agentrun', DATABASE_PASSWORD: 'agentrun' })).toHaveLength(1);
  });

  it('local mode listens only on loopback addresses', () => {
    expect(['127.0.0.1', '127.1.2.3', 'localhost', '::1', '[::1]'].every(isLoopback)).toBe(true);
    expect(['0.0.0.0', '::', '10.0.0.4', 'gateway'].some(isLoopback)).toBe(false);
    expect(localProblems({ AGENTRUN_MODE: 'local', GATEWAY_HOST: '0.0.0.0' })).toEqual([
      'GATEWAY_HOST is 0.0.0.0, but AGENTRUN_MODE=local trusts the X-Org header without authentication and so listens only on loopback addresses: set GATEWAY_HOST=127.0.0.1, or AGENTRUN_MODE=production (API tokens)',
    ]);
    expect(localProblems({ AGENTRUN_MODE: 'production', GATEWAY_HOST: '0.0.0.0' })).toEqual([]);
  });

  it('loadServiceConfig reports them with the other problems of the configuration', () => {
    expect(() => loadServiceConfig(spec, { GATEWAY_HOST: '0.0.0.0' })).toThrow(ConfigError);
    expect(() => loadServiceConfig(spec, { AGENTRUN_MODE: 'production', GATEWAY_HOST: '0.0.0.0' })).toThrow(/CURSOR_SECRET is the development default/);
    expect(loadServiceConfig(spec, { AGENTRUN_MODE: 'production', GATEWAY_HOST: '0.0.0.0', CURSOR_SECRET: 'c'.repeat(32), DATABASE_URL: 'postgres://u:p@db/x' }).GATEWAY_HOST).toBe('0.0.0.0');
  });
});
