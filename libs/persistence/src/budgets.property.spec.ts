import * as fc from 'fast-check';
import { budgetShortfall, monthOf, type RunLimits } from './budgets';

/** Dollars as the ledger keeps them (numeric(20, 8)): whole hundred-millionths. */
const usd = (max: number) => fc.integer({ min: 0, max: max * 1e8 }).map((n) => n / 1e8);
const tokens = (max: number) => fc.integer({ min: 0, max });

describe('the budget check (properties)', () => {
  it('a call fits exactly when spent + reserved + needed is within the limit; a refusal says so with its figures', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.record({ limit: fc.constant('tokens' as const), figures: fc.tuple(tokens(5_000), tokens(5_000), tokens(5_000), tokens(5_000)) }),
          fc.record({ limit: fc.constant('usd' as const), figures: fc.tuple(usd(0.05), usd(0.05), usd(0.05), usd(0.05)) }),
          // At the edge: the call needs exactly what is left, or one unit (a token, a hundred-millionth of a dollar) more or less.
          fc.tuple(fc.constantFrom('tokens' as const, 'usd' as const), tokens(5_000), tokens(5_000), tokens(5_000), fc.integer({ min: -1, max: 1 })).map(([limit, a, b, c, delta]) => {
            const value = (n: number) => (limit === 'tokens' ? n : n / 1e8);
            return { limit, figures: [value(Math.max(0, a + b + c + delta)), value(a), value(b), value(c)] as [number, number, number, number] };
          }),
        ),
        fc.constantFrom('run' as const, 'org' as const),
        ({ limit, figures: [max, spent, reserved, needed] }, scope) => {
        const short = budgetShortfall(scope, limit, max, spent, reserved, needed);
        const fits = limit === 'tokens' ? spent + reserved + needed <= max : Math.round((spent + reserved + needed) * 1e8) <= Math.round(max * 1e8);
        expect(short === undefined).toBe(fits);
        // The rest is about refusals (most of the generated calls: four figures from one range rarely fit).
        fc.pre(short !== undefined);
        const { shortfall } = short;
        expect(shortfall).toMatchObject({ scope, limit, max, spent, reserved, needed });
        expect(shortfall.left).toBeGreaterThanOrEqual(0);
        // What is left is nothing when the limit is passed already, else less than the call needs (else it would have fitted).
        const passed = spent + reserved > max;
        expect(shortfall.left).toBe(passed ? 0 : shortfall.left);
        expect(shortfall.left).toBeLessThan(passed ? Infinity : shortfall.needed);
        expect(shortfall.left).toBeLessThanOrEqual(max);
        expect(shortfall.left).toBeCloseTo(Math.max(0, max - spent - reserved), 8);
        },
      ),
    );
  });

  it('monotone: a smaller call, less spent or reserved, or a higher limit never turns a fit into a refusal', () => {
    fc.assert(
      fc.property(usd(100), usd(100), usd(100), usd(100), usd(10), fc.nat(3), (max, spent, reserved, needed, less, which) => {
        fc.pre(budgetShortfall('run', 'usd', max, spent, reserved, needed) === undefined);
        const lower = (x: number) => Math.max(0, Math.round((x - less) * 1e8) / 1e8);
        const variants = [
          [max + less, spent, reserved, needed],
          [max, lower(spent), reserved, needed],
          [max, spent, lower(reserved), needed],
          [max, spent, reserved, lower(needed)],
        ];
        const [m, s, r, n] = variants[which];
        expect(budgetShortfall('run', 'usd', m, s, r, n)).toBeUndefined();
      }),
    );
  });

  it('under any sequence of reservations, settlements and releases, spent + reserved never passes a run limit', () => {
    type Op = { op: 'reserve'; key: number; tokens: number; usd: number } | { op: 'settle'; key: number; share: number } | { op: 'release'; key: number };
    const op: fc.Arbitrary<Op> = fc.oneof(
      { weight: 3, arbitrary: fc.record({ op: fc.constant('reserve' as const), key: fc.nat(15), tokens: tokens(3_000), usd: usd(3) }) },
      fc.record({ op: fc.constant('settle' as const), key: fc.nat(15), share: fc.double({ min: 0, max: 1, noNaN: true }) }),
      fc.record({ op: fc.constant('release' as const), key: fc.nat(15) }),
    );
    const limitsArb: fc.Arbitrary<RunLimits> = fc.record({ max_tokens: fc.integer({ min: 1, max: 10_000 }), max_cost_usd: usd(10).filter((x) => x > 0) }, { requiredKeys: [] });
    fc.assert(
      fc.property(limitsArb, fc.array(op, { maxLength: 60 }), (limits, ops) => {
        const ledger = new LedgerModel();
        for (const o of ops) {
          if (o.op === 'reserve') ledger.reserve(`k${o.key}`, o.tokens, o.usd, limits);
          // A call uses at most its worst case: it settles to part of what it reserved.
          else if (o.op === 'settle') ledger.settle(`k${o.key}`, o.share);
          else ledger.settle(`k${o.key}`, 0);
          const s = ledger.sums();
          if (s.spent_tokens + s.reserved_tokens > (limits.max_tokens ?? Infinity)) throw new Error(`tokens past the limit: ${JSON.stringify(s)}`);
          if (s.spent_usd + s.reserved_usd > (limits.max_cost_usd ?? Infinity) + 1e-9) throw new Error(`dollars past the limit: ${JSON.stringify(s)}`);
          if (Object.values(s).some((v) => v < 0)) throw new Error(`a negative sum: ${JSON.stringify(s)}`);
        }
      }),
      { numRuns: 60 },
    );
  });

  it('monthOf is the first day of the month, UTC, for any instant', () => {
    fc.assert(
      fc.property(fc.date({ min: new Date('1970-01-01T00:00:00Z'), max: new Date('9999-12-31T23:59:59Z'), noInvalidDate: true }), (at) => {
        const month = monthOf(at);
        expect(month).toMatch(/^\d{4}-\d{2}-01$/);
        const first = new Date(`${month}T00:00:00Z`);
        expect(first.getTime()).toBeLessThanOrEqual(at.getTime());
        expect(first.getUTCFullYear() * 12 + first.getUTCMonth()).toBe(at.getUTCFullYear() * 12 + at.getUTCMonth());
      }),
    );
  });
});

/**
 * BudgetLedger's reservation table and its sums, in memory, for one run: what `reserve` inserts when
 * `budgetShortfall` lets it (a key already there is found, not reserved twice), what `settle` and
 * `release` change. The advisory lock makes reservations of one org sequential, as they are here.
 */
class LedgerModel {
  private readonly rows = new Map<string, { reserved_tokens: number; reserved_usd: number; settled: boolean; tokens: number; usd: number }>();

  reserve(key: string, tokens: number, usd: number, limits: RunLimits): boolean {
    if (this.rows.has(key)) return true;
    const s = this.sums();
    if (limits.max_tokens !== undefined && budgetShortfall('run', 'tokens', limits.max_tokens, s.spent_tokens, s.reserved_tokens, tokens)) return false;
    if (limits.max_cost_usd !== undefined && budgetShortfall('run', 'usd', limits.max_cost_usd, s.spent_usd, s.reserved_usd, usd)) return false;
    this.rows.set(key, { reserved_tokens: tokens, reserved_usd: usd, settled: false, tokens: 0, usd: 0 });
    return true;
  }

  /** Settles to `share` of what was reserved (0: a release). Settling again changes nothing. */
  settle(key: string, share: number): void {
    const row = this.rows.get(key);
    if (!row || row.settled) return;
    Object.assign(row, { settled: true, tokens: Math.floor(row.reserved_tokens * share), usd: Math.floor(row.reserved_usd * share * 1e8) / 1e8 });
  }

  /** As the ledger's SUMS: dollars added as numeric, so to the hundred-millionth. */
  sums(): { spent_tokens: number; reserved_tokens: number; spent_usd: number; reserved_usd: number } {
    const rows = [...this.rows.values()];
    const add = (pick: (r: (typeof rows)[number]) => number, settled: boolean) => rows.filter((r) => r.settled === settled).reduce((n, r) => n + Math.round(pick(r) * 1e8), 0) / 1e8;
    return { spent_tokens: add((r) => r.tokens, true), reserved_tokens: add((r) => r.reserved_tokens, false), spent_usd: add((r) => r.usd, true), reserved_usd: add((r) => r.reserved_usd, false) };
  }
}
