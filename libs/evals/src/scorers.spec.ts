import { choice, exact, includes, json, numeric, regex, ScorerOptionError } from './scorers';

describe('scorers', () => {
  it('exact ignores case and surrounding whitespace, and takes any of several targets', () => {
    expect(exact('  Paris ', 'paris').value).toBe(1);
    expect(exact('Paris, France', 'Paris').value).toBe(0);
    expect(exact('Lutetia', ['Paris', 'lutetia'])).toMatchObject({ value: 1, explanation: "the output is 'lutetia'" });
  });

  it('includes finds a target inside the output', () => {
    expect(includes('The capital is Paris.', 'paris').value).toBe(1);
    expect(includes('The capital is Lyon.', ['Paris', 'Marseille'])).toMatchObject({ value: 0, explanation: "the output contains none of 'Paris', 'Marseille'" });
  });

  it('regex matches, and a bad pattern is an option error', () => {
    expect(regex('order #1234 shipped', '#\\d{4}').value).toBe(1);
    expect(regex('no order', '#\\d{4}').value).toBe(0);
    expect(() => regex('x', '(')).toThrow(ScorerOptionError);
  });

  it('numeric takes the last number, thousands separators and a tolerance', () => {
    expect(numeric('2 + 2 = 4', '4').value).toBe(1);
    expect(numeric('about 1,234 items', '1234').value).toBe(1);
    expect(numeric('pi is 3.1416', '3.14159', 0.001).value).toBe(1);
    expect(numeric('pi is 3.2', '3.14159', 0.001).value).toBe(0);
    expect(numeric('no idea', '4')).toMatchObject({ value: 0, explanation: 'the output has no number' });
    expect(() => numeric('4', 'four')).toThrow(ScorerOptionError);
  });

  it('choice settles on the last letter named', () => {
    expect(choice('B', 'b').value).toBe(1);
    expect(choice('The answer is (C).', 'C').value).toBe(1);
    expect(choice('Not A. Answer: D', 'D').value).toBe(1);
    expect(choice('I think so', 'A').value).toBe(0);
    expect(choice('no choice here', 'A')).toMatchObject({ value: 0 });
  });

  it('json parses (fenced too) and checks required keys', () => {
    expect(json('{"a":1,"b":2}', ['a', 'b']).value).toBe(1);
    expect(json('```json\n{"a":1}\n```', ['a']).value).toBe(1);
    expect(json('{"a":1}', ['b'])).toMatchObject({ value: 0, explanation: 'JSON without b' });
    expect(json('not json').value).toBe(0);
  });
});

describe('a pattern that backtracks without bound', () => {
  it('is stopped at the time limit with an error that says so, and the next match runs as usual', () => {
    const started = Date.now();
    expect(() => regex(`${'a'.repeat(40)}b`, '(a+)+$', '')).toThrow(/took longer than 250 ms/);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(regex('the answer is 42', '\\d+', '').value).toBe(1);
  });
});
