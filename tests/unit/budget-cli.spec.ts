/**
 * tools/budget.js's arguments, read without a database: what each verb plans, and what is refused with
 * a usage error (exit code 2) before anything is touched.
 */
// eslint-disable-next-line @typescript-eslint/no-require-imports -- the CLI is plain CommonJS, run by node as it is
const { plan } = require('../../tools/budget.js') as { plan: (argv: string[]) => Record<string, unknown> };

describe('npm run budget', () => {
  it('plans set, list and clear, with the org normalised as everywhere else', () => {
    expect(plan(['set', '--org', 'Acme', '--monthly-usd', '500'])).toEqual({ command: 'set', org: 'acme', monthlyUsd: 500 });
    expect(plan(['set', '--org=acme', '--monthly-usd=0.25'])).toEqual({ command: 'set', org: 'acme', monthlyUsd: 0.25 });
    expect(plan(['list'])).toEqual({ command: 'list', org: undefined });
    expect(plan(['list', '--org', 'ACME'])).toEqual({ command: 'list', org: 'acme' });
    expect(plan(['clear', '--org', 'acme'])).toEqual({ command: 'clear', org: 'acme' });
  });

  it.each([
    [['set', '--org', 'acme'], /set needs --monthly-usd N/],
    [['set', '--monthly-usd', '5'], /set needs --org ORG/],
    [['set', '--org', 'acme', '--monthly-usd', '0'], /must be a number of dollars above 0, got '0'/],
    [['set', '--org', 'acme', '--monthly-usd', '-3'], /--monthly-usd needs a value|must be a number of dollars above 0/],
    [['set', '--org', 'acme', '--monthly-usd', '1e3'], /must be a number of dollars above 0, got '1e3'/],
    [['set', '--org', 'a b', '--monthly-usd', '5'], /--org must match/],
    [['clear'], /clear needs --org ORG/],
    [['list', 'extra'], /unexpected argument extra/],
    [['raise'], /unknown command raise/],
    [[], /no command given/],
  ])('refuses %j', (argv, message) => {
    expect(() => plan(argv)).toThrow(message);
  });
});
