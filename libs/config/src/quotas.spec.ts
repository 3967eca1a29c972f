import { ConfigError, loadConfig } from './env';
import { DEFAULT_QUOTA, parseQuotas, quotaFor, quotasSpec } from './quotas';

describe('AGENTRUN_QUOTAS', () => {
  it('gives every org the defaults when unset or empty', () => {
    for (const text of [undefined, '', '  ']) {
      const quotas = parseQuotas(text);
      expect(quotaFor(quotas, 'acme')).toEqual(DEFAULT_QUOTA);
    }
    expect(DEFAULT_QUOTA).toEqual({ active_runs: 100, sse_streams: 20, max_steps: 1_000, snapshots_per_run: 200, snapshot_bytes_per_run: 2 * 1024 ** 3 });
  });

  it('fills an org from default and default from the built-in limits; org names are case-insensitive', () => {
    const quotas = parseQuotas(JSON.stringify({ default: { active_runs: 50 }, orgs: { Acme: { sse_streams: 2 }, small: { max_steps: 10 } } }));
    expect(quotaFor(quotas, 'other')).toEqual({ ...DEFAULT_QUOTA, active_runs: 50 });
    expect(quotaFor(quotas, 'acme')).toEqual({ ...DEFAULT_QUOTA, active_runs: 50, sse_streams: 2 });
    expect(quotaFor(quotas, 'ACME')).toEqual(quotaFor(quotas, 'acme'));
    expect(quotaFor(quotas, 'small').max_steps).toBe(10);
    // Not inherited from Object.prototype.
    expect(quotaFor(quotas, 'constructor')).toEqual(quotas.default);
  });

  it.each([
    ['{', /is not JSON/],
    ['[]', /must be a JSON object/],
    ['{"defaults": {}}', /takes "default" and "orgs", not "defaults"/],
    ['{"default": {"active_run": 3}}', /AGENTRUN_QUOTAS\.default\.active_run is not a quota; the quotas are active_runs, sse_streams/],
    ['{"orgs": {"acme": {"max_steps": 0}}}', /orgs\.acme\.max_steps must be a positive integer, got 0/],
    ['{"orgs": {"acme": {"max_steps": 1.5}}}', /must be a positive integer/],
    ['{"orgs": {"acme": {"max_steps": "10"}}}', /must be a positive integer, got "10"/],
    ['{"orgs": {"acme": 3}}', /orgs\.acme must be an object of limits/],
    ['{"orgs": {"a/b": {}}}', /'a\/b' is not an org id/],
    ['{"orgs": {"Acme": {}, "acme": {}}}', /names 'acme' twice/],
    ['{"orgs": []}', /orgs must be an object/],
  ])('refuses %s at start, naming the setting', (text, message) => {
    let error: unknown;
    try {
      loadConfig(quotasSpec, { AGENTRUN_QUOTAS: text });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems.join('\n')).toMatch(message);
  });
});
