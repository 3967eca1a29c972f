/**
 * tools/token.js's arguments, read without a database: what each command-key verb plans, and what is
 * refused with a usage error (exit code 2) before anything is touched.
 */
// eslint-disable-next-line @typescript-eslint/no-require-imports -- the CLI is plain CommonJS, run by node as it is
const { plan, UsageError } = require('../../tools/token.js') as { plan: (argv: string[]) => Record<string, unknown>; UsageError: new () => Error };

describe('npm run token -- command-key', () => {
  it('plans create, list and revoke, with the org normalised as everywhere else', () => {
    expect(plan(['command-key', 'create', '--org', 'Acme.Prod'])).toEqual({ command: 'command-key create', org: 'acme.prod' });
    expect(plan(['command-key', 'create', '--org=acme'])).toEqual({ command: 'command-key create', org: 'acme' });
    expect(plan(['command-key', 'list'])).toEqual({ command: 'command-key list', org: undefined });
    expect(plan(['command-key', 'list', '--org', 'ACME'])).toEqual({ command: 'command-key list', org: 'acme' });
    expect(plan(['command-key', 'revoke', 'ck_0123456789abcdef'])).toEqual({ command: 'command-key revoke', id: 'ck_0123456789abcdef' });
  });

  it.each([
    [['command-key'], /needs create, list or revoke/],
    [['command-key', 'rotate'], /unknown command-key command rotate/],
    [['command-key', 'create'], /needs --org ORG/],
    [['command-key', 'create', '--org'], /--org needs a value/],
    [['command-key', 'create', '--org', 'a/b'], /--org must match/],
    [['command-key', 'create', '--org', 'acme', '--label', 'x'], /unknown option --label/],
    [['command-key', 'create', '--org', 'acme', 'extra'], /unexpected argument extra/],
    [['command-key', 'list', '--org', 'a', '--org', 'b'], /--org given twice/],
    [['command-key', 'revoke'], /exactly one key id/],
    [['command-key', 'revoke', 'tok_0123456789abcdef'], /ck_ followed by 16 hex digits/],
  ])('refuses %j', (argv, message) => {
    expect(() => plan(argv)).toThrow(UsageError);
    expect(() => plan(argv)).toThrow(message);
  });

  it('leaves the API token commands as they were', () => {
    expect(plan(['create', '--org', 'Acme', '--label', 'ci'])).toEqual({ command: 'create', org: 'acme', label: 'ci' });
    expect(plan(['revoke', 'tok_0123456789abcdef'])).toEqual({ command: 'revoke', id: 'tok_0123456789abcdef' });
  });
});
