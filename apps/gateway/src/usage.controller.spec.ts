import { ProblemException } from './problem';
import { BOUND_PATTERN, parseBound, usageRange } from './usage.controller';

function problem(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof ProblemException) return `${err.getStatus()} ${JSON.stringify(err.getResponse())}`;
    throw err;
  }
  throw new Error('expected a problem');
}

describe('GET /usage range', () => {
  const now = new Date('2026-12-15T10:30:00Z');

  it('defaults to the start of the current UTC month up to now', () => {
    expect(usageRange(undefined, undefined, now)).toEqual({ from: new Date('2026-12-01T00:00:00Z'), to: now });
    expect(usageRange(undefined, '2026-03-10', now)).toEqual({ from: new Date('2026-03-01T00:00:00Z'), to: new Date('2026-03-10T00:00:00Z') });
  });

  it('takes UTC days and date-times with an offset', () => {
    expect(parseBound('from', '2026-02-28')).toEqual(new Date('2026-02-28T00:00:00Z'));
    expect(parseBound('from', '2026-02-28T08:00:00+02:00')).toEqual(new Date('2026-02-28T06:00:00Z'));
    expect(parseBound('to', '2026-02-28T08:00Z')).toEqual(new Date('2026-02-28T08:00:00Z'));
  });

  it.each([
    ['2026-12-01T08:00:00', 400, /must be a date .* or a date-time with an offset/],
    ['yesterday', 400, /must be a date/],
    ['2026-02-31', 422, /not a real date/],
    ['2026-13-01', 422, /not a real date/],
    ['0000-01-01', 422, /from 1970 on/],
  ])('refuses %s: a 400 when it is not in the documented form, a 422 when it names no real day', (text, status, message) => {
    expect(problem(() => parseBound('from', text))).toMatch(new RegExp(`^${status} `));
    expect(problem(() => parseBound('from', text))).toMatch(message);
  });

  it('documents exactly the forms it takes', () => {
    const re = new RegExp(BOUND_PATTERN);
    for (const ok of ['2026-12-01', '2026-12-01T08:00Z', '2026-12-01t08:00:00.5+02:00']) expect({ ok, matches: re.test(ok) }).toEqual({ ok, matches: true });
    for (const bad of ['', '2026-12-01T08:00', '2026-12-1', ' 2026-12-01']) expect({ bad, matches: re.test(bad) }).toEqual({ bad, matches: false });
    expect(parseBound('to', '2026-12-01t08:00:00.5+02:00')).toEqual(new Date('2026-12-01T06:00:00.5Z'));
  });

  it('refuses an empty or backward range, and one longer than 400 days, with a 422', () => {
    expect(problem(() => usageRange('2026-12-01', '2026-12-01', now))).toMatch(/^422 .*must be before to/);
    expect(problem(() => usageRange('2026-12-02', '2026-12-01', now))).toMatch(/must be before to/);
    expect(problem(() => usageRange('2025-01-01', '2026-12-01', now))).toMatch(/at most 400 days/);
  });
});
