/**
 * What budget enforcement and shared rate limits add to a model call, in one run on the shared Postgres
 * and the local model server: the same chat completion made alone (the baseline), wrapped as `callModel`
 * wraps it with budgets on (reserve the worst case in the reservation ledger, the call, settle to its
 * usage), and with a shared rate limit too (a turn asked of the bucket before the reservation, granted
 * under a limit no call reaches, and the unused worst case refunded after), on a
 * fresh database with an org monthly budget set (so the org's month is summed on every reservation)
 * and a run budget on every call (so the run's sums are read too). Sides alternate call by call, so a
 * drift in the machine's load weighs on both alike. Prints p50 and p90 of each side, the added p50
 * (ms) and the ratio; then reservations alone, under 4 concurrent reservers of one org (the advisory
 * lock serialises them). Checks every reservation settled and the org's spend equals the sum of the
 * calls, or exits non-zero.
 *
 *   npm run bench:budget [-- CALLS]       (default 400 calls a side)
 */
import { performance } from 'node:perf_hooks';
import { createChatClient, usageOf, worstCaseOf } from '@agentrun/activities';
import { parseModelPrices } from '@agentrun/config';
import { BudgetLedger, createDataSource, migrate, RateLimiter } from '@agentrun/persistence';
import { startModelServer } from '../../apps/model-server/src/model-server';
import { freshDatabase } from '../support/database';

const CALLS = Number(process.argv[2] ?? 400);
const ORG = 'bench';
const MAX_TOKENS = 1_024;
const prices = parseModelPrices(JSON.stringify({ scripted: { input_usd_per_million: 3, output_usd_per_million: 15 } }));

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))];
const ms = (n: number) => n.toFixed(2);

async function main(): Promise<void> {
  const model = await startModelServer();
  const db = await freshDatabase();
  const dataSource = createDataSource({ url: db.url, poolSize: 6, applicationName: 'agentrun-budget-bench' });
  await dataSource.initialize();
  try {
    await migrate(dataSource);
    const ledger = new BudgetLedger(dataSource);
    await ledger.setOrgBudget(ORG, 1_000_000);
    const chat = createChatClient({ baseUrl: model.url, model: 'scripted', timeoutMs: 10_000 });
    const messages = [
      { role: 'system' as const, content: 'You are an agent working toward this goal: find the parser notes' },
      { role: 'user' as const, content: 'step 3: plan the next move toward: find the parser notes' },
    ];
    const ask = () => chat.complete({ messages, max_tokens: MAX_TOKENS });
    // Warm both paths (connections, JIT) before anything is timed.
    for (let i = 0; i < 20; i++) await ask();

    const limiter = new RateLimiter(dataSource);
    // A limit no call of the bench reaches: every turn is granted, so what is timed is the asking.
    const limit = { requests_per_minute: 1_000_000, tokens_per_minute: 1_000_000_000 };
    const bare: number[] = [];
    const budgeted: number[] = [];
    const limited: number[] = [];
    let spent = 0;
    for (let i = 0; i < CALLS; i++) {
      let t0 = performance.now();
      await ask();
      bare.push(performance.now() - t0);

      t0 = performance.now();
      const key = `${ORG}/run-${i % 20}:${i}:model`;
      const worst = worstCaseOf(messages, 'scripted', prices, MAX_TOKENS);
      const reserved = await ledger.reserve({ key, org: ORG, run_id: `run-${i % 20}`, ...worst }, { max_tokens: 10_000_000, max_cost_usd: 10_000 });
      if (!reserved.ok) throw new Error(`reservation refused: ${JSON.stringify(reserved)}`);
      const reply = await ask();
      const usage = usageOf({ messages }, reply, 'scripted', prices);
      await ledger.settle(key, usage.prompt_tokens + usage.completion_tokens, usage.cost_usd);
      budgeted.push(performance.now() - t0);
      spent += usage.cost_usd;

      // As callModel makes it with budgets and a shared rate limit: ask for a turn, reserve, call, settle and refund.
      t0 = performance.now();
      const limitedKey = `${ORG}/rl-${i % 20}:${i}:model`;
      const limitedWorst = worstCaseOf(messages, 'scripted', prices, MAX_TOKENS);
      const turn = await limiter.acquire({ bucket: 'bench scripted', share: `${ORG}/team`, weight: 2, tokens: limitedWorst.tokens, limit });
      if (!turn.ok) throw new Error(`a turn was refused under a limit no call reaches: ${JSON.stringify(turn)}`);
      const held = await ledger.reserve({ key: limitedKey, org: ORG, run_id: `rl-${i % 20}`, ...limitedWorst }, { max_tokens: 10_000_000, max_cost_usd: 10_000 });
      if (!held.ok) throw new Error(`reservation refused: ${JSON.stringify(held)}`);
      const limitedReply = await ask();
      const limitedUsage = usageOf({ messages }, limitedReply, 'scripted', prices);
      const used = limitedUsage.prompt_tokens + limitedUsage.completion_tokens;
      await Promise.all([ledger.settle(limitedKey, used, limitedUsage.cost_usd), limiter.refund('bench scripted', `${ORG}/team`, limitedWorst.tokens - used, limit)]);
      limited.push(performance.now() - t0);
      spent += limitedUsage.cost_usd;
    }

    // Reservations alone, four reservers of one org at once: the org's lock is the queue.
    const alone: number[] = [];
    const started = performance.now();
    await Promise.all(
      [0, 1, 2, 3].map(async (w) => {
        for (let i = 0; i < CALLS / 4; i++) {
          const t0 = performance.now();
          const key = `${ORG}/lock-${w}:${i}:model`;
          await ledger.reserve({ key, org: ORG, run_id: `lock-${w}`, tokens: 100, usd: 0.0001 }, {});
          await ledger.settle(key, 0, 0);
          alone.push(performance.now() - t0);
        }
      }),
    );
    const wall = performance.now() - started;

    const [standing] = await ledger.orgBudgets(ORG);
    const unsettled = (await dataSource.query('SELECT count(*)::int AS n FROM budget_reservations WHERE NOT settled'))[0].n as number;
    if (unsettled !== 0 || Math.abs(standing.spent_usd - Math.round(spent * 1e8) / 1e8) > 1e-6 || standing.reserved_usd !== 0) {
      throw new Error(`ledger check failed: ${unsettled} unsettled, spent ${standing.spent_usd} against ${spent}, reserved ${standing.reserved_usd}`);
    }
    console.log(`budget bench: ${CALLS} calls a side, alternating, local model server, fresh database (org budget set, run budget on every call)`);
    console.log(`| path | p50 ms | p90 ms |`);
    console.log(`| --- | --- | --- |`);
    console.log(`| model call alone (baseline) | ${ms(pct(bare, 0.5))} | ${ms(pct(bare, 0.9))} |`);
    console.log(`| reserve + model call + settle | ${ms(pct(budgeted, 0.5))} | ${ms(pct(budgeted, 0.9))} |`);
    console.log(`| turn + reserve + model call + settle and refund | ${ms(pct(limited, 0.5))} | ${ms(pct(limited, 0.9))} |`);
    console.log(`added p50 by the budget: ${ms(pct(budgeted, 0.5) - pct(bare, 0.5))} ms; ratio ${(pct(budgeted, 0.5) / pct(bare, 0.5)).toFixed(2)}x`);
    console.log(`added p50 by budget and rate limit: ${ms(pct(limited, 0.5) - pct(bare, 0.5))} ms; ratio ${(pct(limited, 0.5) / pct(bare, 0.5)).toFixed(2)}x (the rate limit alone: ${ms(pct(limited, 0.5) - pct(budgeted, 0.5))} ms)`);
    console.log(`reserve + settle alone, 4 concurrent reservers of one org: p50 ${ms(pct(alone, 0.5))} ms, p90 ${ms(pct(alone, 0.9))} ms, ${(alone.length / (wall / 1000)).toFixed(0)} reservations/s`);
    console.log(`ledger checked: every reservation settled; the org's month $${standing.spent_usd} = the calls' $${Math.round(spent * 1e8) / 1e8}`);
  } finally {
    await dataSource.destroy();
    await db.drop();
    await model.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
