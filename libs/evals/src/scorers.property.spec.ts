import * as fc from 'fast-check';
import { canonicalJson } from './canonical';
import { caseScore, readGrade } from './score';
import { choice, exact, includes, json, normalise, numeric, regex, ScorerOptionError, type Score } from './scorers';

const anyText = fc.string({ unit: 'binary', maxLength: 40 });
const target = fc.oneof(anyText, fc.array(anyText, { minLength: 1, maxLength: 4 }));
const whitespace = fc.string({ unit: fc.constantFrom(' ', '\t', '\n', '\r', '\u00a0', '\u2003', '\u3000', '\ufeff'), minLength: 1, maxLength: 3 });
/** The same text as a person may type it again: ASCII letters' case changed, every whitespace run another one, spaces around it. */
const retyped = (text: string) => {
  const words = text.split(/\s+/);
  return fc.tuple(fc.array(whitespace, { minLength: words.length + 1, maxLength: words.length + 1 }), fc.array(fc.boolean(), { minLength: text.length + 1, maxLength: text.length + 1 })).map(([gaps, upper]) => {
    let i = 0;
    const flipped = words.map((word) => [...word].map((ch) => (/[a-z]/i.test(ch) && upper[i++] ? ch.toUpperCase() : ch)).join(''));
    return gaps[0] + flipped.map((word, k) => (k === 0 ? word : gaps[k] + word)).join('') + gaps[words.length];
  });
};
const values = (scores: Score[]) => scores.map((s) => s.value);
const isZeroOrOne = (s: Score) => s.value === 0 || s.value === 1;

describe('the scorers (properties)', () => {
  it('normalise is idempotent, trimmed, single-spaced and lowercase', () => {
    fc.assert(
      fc.property(anyText, (text) => {
        const n = normalise(text);
        expect(normalise(n)).toBe(n);
        expect(n).toBe(n.trim());
        expect(n).not.toMatch(/\s\s|[^\S ]/);
        expect(n.toLowerCase()).toBe(n);
      }),
    );
  });

  it('exact is reflexive, blind to case and spacing, and a list of targets scores as its best member in any order', () => {
    fc.assert(
      fc.property(anyText, target, fc.nat(), (text, t, shift) => {
        expect(exact(text, text).value).toBe(1);
        expect(exact(normalise(text), text).value).toBe(1);
        const list = Array.isArray(t) ? t : [t];
        const best = Math.max(...list.map((one) => exact(text, one).value));
        expect(exact(text, t).value).toBe(best);
        expect(exact(text, [...list.slice(shift % list.length), ...list.slice(0, shift % list.length)]).value).toBe(best);
        expect(exact(text, [...list, text]).value).toBe(1);
        for (const scorer of [exact, includes]) expect(isZeroOrOne(scorer(text, t))).toBe(true);
      }),
    );
    fc.assert(fc.property(anyText.chain((text) => fc.tuple(fc.constant(text), retyped(text))), ([text, again]) => expect(exact(again, text).value).toBe(1)));
  });

  it('includes holds whenever exact does, and finds a target inside any ASCII context', () => {
    fc.assert(
      fc.property(anyText, target, fc.string({ maxLength: 20 }), fc.string({ maxLength: 20 }), (text, t, before, after) => {
        // Both score 0 or 1 (checked above), so this is: includes is 1 whenever exact is.
        expect(includes(text, t).value).toBeGreaterThanOrEqual(exact(text, t).value);
        expect(includes(`${before} ${text} ${after}`, text).value).toBe(1);
      }),
    );
  });

  it('regex: the escaped text matches itself anywhere; a pattern that does not compile is the scorer options\' fault', () => {
    const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');
    fc.assert(
      fc.property(anyText, fc.string({ maxLength: 10 }), fc.string({ maxLength: 10 }), fc.constantFrom('', 'i', 'u', 'is'), (text, before, after, flags) => {
        expect(regex(`${before}${text}${after}`, escape(text), flags).value).toBe(1);
        expect(isZeroOrOne(regex(after, escape(text), flags))).toBe(true);
      }),
    );
    fc.assert(fc.property(fc.constantFrom('(', '[', 'a{2,1}', '(?<x>', '\\'), (bad) => expect(() => regex('x', bad)).toThrow(ScorerOptionError)));
  });

  it('numeric: any finite number, as JS or as US thousands write it, is itself; a wider tolerance never takes a match away', () => {
    fc.assert(
      fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.double({ min: -1e6, max: 1e6, noNaN: true }), fc.double({ min: 0, max: 100, noNaN: true }), fc.double({ min: 0, max: 100, noNaN: true }), (n, other, tol, more) => {
        expect(numeric(`the answer is ${String(n)}`, String(n)).value).toBe(1);
        const before = numeric(`maybe 3, finally ${other}`, String(n), tol).value;
        // numeric scores 0 or 1, so this is: a match at tol is one at tol + more.
        expect(numeric(`maybe 3, finally ${other}`, String(n), tol + more).value).toBeGreaterThanOrEqual(before);
      }),
    );
    fc.assert(fc.property(fc.maxSafeInteger(), (n) => expect(numeric(`total: ${n.toLocaleString('en-US')} items`, String(n)).value).toBe(1)));
  });

  it('choice: the letter settled on last is the one scored, whatever case the target has', () => {
    const letter = fc.constantFrom(...'ABCDEFGHIJKLMNOPQRSTUVWXYZ');
    fc.assert(
      fc.property(letter, letter, fc.constantFrom((l: string) => `(${l})`, (l: string) => `${l}.`, (l: string) => `answer: ${l}`, (l: string) => l), (first, last, form) => {
        expect(choice(`${first} or ${form(last)}`, last.toLowerCase()).value).toBe(1);
        expect(choice(form(last), first).value).toBe(first === last ? 1 : 0);
      }),
    );
  });

  it('json: any JSON value, plain or fenced, is valid JSON', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(json(JSON.stringify(value)).value).toBe(1);
        expect(json(`\`\`\`json\n${JSON.stringify(value, null, 2)}\n\`\`\``).value).toBe(1);
      }),
    );
  });
});

describe("a case's score and a judge's grade (properties)", () => {
  // What scorers give: 0 or 1, a judge's 0.5, the files scorer's fractions, anything in [0, 1]; mostly twentieths,
  // whose means land exactly half way between two thousandths often enough for float noise to show.
  const fraction = fc.integer({ min: 1, max: 12 }).chain((n) => fc.integer({ min: 0, max: n }).map((k) => k / n));
  const twentieths = fc.integer({ min: 0, max: 20 }).map((k) => k / 20);
  const value = fc.oneof({ weight: 4, arbitrary: twentieths }, { weight: 1, arbitrary: fraction }, { weight: 1, arbitrary: fc.double({ min: 0, max: 1, noNaN: true }) });
  const score = fc.record({ scorer: fc.constant('s'), value, explanation: fc.constant('') });

  it('a case score is the mean of its scores to 3 decimals, in [0, 1], the same in any order of the scorers', () => {
    fc.assert(
      fc.property(fc.array(score, { minLength: 1, maxLength: 10 }), (scores) => {
        const s = caseScore(scores);
        // Every rotation of the scorers, forwards and backwards.
        for (let k = 0; k < scores.length; k++) {
          const rotated = [...scores.slice(k), ...scores.slice(0, k)];
          for (const order of [rotated, [...rotated].reverse()]) if (caseScore(order) !== s) throw new Error(`${caseScore(order)} in another order, ${s} in this one`);
        }
        const mean = values(scores).reduce((a, b) => a + b, 0) / scores.length;
        expect(s).toBeGreaterThanOrEqual(0);
        expect(s).toBeLessThanOrEqual(1);
        expect(Math.abs(s - mean)).toBeLessThanOrEqual(0.0005 + 1e-12);
        expect(Math.round(s * 1000)).toBe(s * 1000);
      }),
      { numRuns: 300 },
    );
  });

  it("the judge's last grade is the one that counts, whatever it said before", () => {
    const grade = fc.constantFrom('C', 'P', 'I');
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.string({ maxLength: 30 }), grade), { maxLength: 3 }), fc.string({ maxLength: 30 }).filter((s) => !/GRADE:/.test(s)), grade, (earlier, before, last) => {
        const reply = `${earlier.map(([text, g]) => `${text} GRADE: ${g}`).join('\n')}\n${before}\nGRADE: ${last}`;
        expect(readGrade(reply).value).toBe({ C: 1, P: 0.5, I: 0 }[last]);
      }),
    );
  });
});

describe('canonical JSON (properties)', () => {
  /** The same value with every object's keys in another order. */
  const shuffled = (value: unknown, seed: number): unknown => {
    if (Array.isArray(value)) return value.map((v) => shuffled(v, seed));
    if (value === null || typeof value !== 'object') return value;
    const entries = Object.entries(value);
    const k = entries.length ? seed % entries.length : 0;
    return Object.fromEntries([...entries.slice(k), ...entries.slice(0, k)].reverse().map(([key, v]) => [key, shuffled(v, seed + 1)]));
  };

  it('one text per value: any key order gives the same text, which parses back to an equal value and is its own canonical form', () => {
    fc.assert(
      fc.property(fc.jsonValue({ stringUnit: 'binary' }), fc.nat(), (value, seed) => {
        const text = canonicalJson(value);
        expect(canonicalJson(shuffled(value, seed))).toBe(text);
        expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify(value)));
        expect(canonicalJson(JSON.parse(text))).toBe(text);
      }),
    );
  });
});
