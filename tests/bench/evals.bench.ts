/**
 * Real evals at parallelism 20, beside a bare client, in one run: an isolated platform with
 * EVAL_PARALLELISM=20 and EVAL_SLOTS=20 runs the `generate` solver with the `exact` scorer over N inline
 * cases `[answer: <n>]` against the local model server, timed from `POST /evals` to the read model's
 * `awaiting_review`; cases/s is N over that time, and the p50 case duration comes from the results
 * route. The baseline is the same N requests (one user message with the case's input, the worker's
 * max_tokens) sent straight to the same model server by the project's chat client, 20 at a time. The two
 * alternate for a few rounds, so the machine's drift falls on both; medians and their ratio are printed.
 * Then where the last platform round's time went, read from its Temporal history.
 *
 *   npm run bench:evals -- [cases=200] [rounds=3]
 */
import { performance } from 'node:perf_hooks';
import { Client, Connection } from '@temporalio/client';
import { createChatClient, type ChatClient } from '@agentrun/activities';
import { workflowIdFor } from '@agentrun/contracts';
import { loadGpuWorkerConfig } from '../../apps/gpu-worker/src/config';
import { Platform, uniqueId } from '../support/platform';
import { stackUrls } from '../support/stack-env';
import { waitFor } from '../support/wait';
import { percentile } from './command-to-sse.bench';

const ORG = 'bench';
const PARALLELISM = 20;
/** An inline dataset holds at most this many cases (the command schema's limit). */
const MAX_INLINE_CASES = 500;
const WARM_UP_CASES = 20;

interface BenchCase {
  id: string;
  input: string;
  target: string;
}

/** N cases the local model server answers right: `[answer: n]` is answered with exactly n. */
function benchCases(n: number): BenchCase[] {
  return Array.from({ length: n }, (_, i) => ({ id: `case-${String(i + 1).padStart(4, '0')}`, input: `Benchmark case ${i + 1}. [answer: ${i + 1}]`, target: String(i + 1) }));
}

/** Runs `work` over `items`, `concurrency` at a time, as the eval's fan-out does (a free slot takes the next item). */
async function pooled<T>(items: T[], concurrency: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      while (next < items.length) await work(items[next++]);
    }),
  );
}

interface Round {
  seconds: number;
  /** Per case (platform: the case's own duration_ms) or per call (bare client), in ms. */
  durations: number[];
}

/** The baseline: every case's request straight to the model server, checked against its target. */
async function bareRound(client: ChatClient, cases: BenchCase[], maxTokens: number): Promise<Round> {
  const durations: number[] = [];
  const t0 = performance.now();
  await pooled(cases, PARALLELISM, async (c) => {
    const t = performance.now();
    const reply = await client.complete({ messages: [{ role: 'user', content: c.input }], max_tokens: maxTokens });
    durations.push(performance.now() - t);
    if (reply.content !== c.target) throw new Error(`the model server answered ${JSON.stringify(reply.content)} to ${c.id}, expected ${JSON.stringify(c.target)}`);
  });
  return { seconds: (performance.now() - t0) / 1000, durations };
}

interface PlatformRound extends Round {
  runId: string;
  /** Epoch ms of the POST and of the read model's `awaiting_review`, to set beside the history's clock. */
  postedAt: number;
  reviewAt: number;
  /** Each case's own duration_ms (solve and score, inside the activity) by case id. */
  byCase: Map<string, number>;
}

interface RunRow {
  status: string;
  done: number | null;
  ok: number | null;
  score: number | null;
}

/** One eval over `cases` through the gateway; throws unless every case finished right. */
async function platformRound(platform: Platform, cases: BenchCase[], count?: number): Promise<PlatformRound> {
  const runId = uniqueId('evals');
  const total = count ?? cases.length;
  const postedAt = Date.now();
  const t0 = performance.now();
  const started = await platform.http('POST', '/evals', {
    org: ORG,
    body: { run_id: runId, model: 'scripted', reviewers: ['alice'], dataset: { name: 'bench-evals', cases }, ...(count ? { cases: count } : {}), solver: 'generate', scorers: ['exact'] },
  });
  if (started.status !== 202) throw new Error(`POST /evals answered ${started.status}: ${JSON.stringify(started.body)}`);
  const row = await waitFor(`eval ${runId} to await review`, async () => {
    const [r] = await platform.query<RunRow>(
      `SELECT status, (state->>'done')::int AS done, (state->'counts'->>'ok')::int AS ok, (state->>'score')::float AS score FROM runs WHERE org = $1 AND run_id = $2`,
      [ORG, runId],
    );
    return r && ['awaiting_review', 'failed', 'cancelled'].includes(r.status) ? r : undefined;
  }, Math.max(120_000, total * 1_000), 10);
  const seconds = (performance.now() - t0) / 1000;
  const reviewAt = Date.now();
  if (row.status !== 'awaiting_review' || row.ok !== total || row.score !== 1) {
    throw new Error(`eval ${runId} ended ${row.status} with ${row.ok}/${total} cases ok and score ${row.score}; every case should be answered right`);
  }
  const res = await fetch(`${platform.gatewayUrl}/runs/${runId}/results?format=jsonl`, { headers: { 'X-Org': ORG } });
  if (res.status !== 200) throw new Error(`GET /runs/${runId}/results answered ${res.status}: ${await res.text()}`);
  const results = (await res.text()).trim().split('\n').map((line) => JSON.parse(line) as { case_id: string; duration_ms: number | null });
  const byCase = new Map(results.filter((r) => r.duration_ms !== null).map((r) => [r.case_id, r.duration_ms as number]));
  if (byCase.size !== total) throw new Error(`eval ${runId} lists ${byCase.size} case durations for ${total} cases`);
  return { seconds, durations: [...byCase.values()], runId, postedAt, reviewAt, byCase };
}

// ---------------------------------------------------------------------------------------------
// Where the time went: one run's Temporal history
// ---------------------------------------------------------------------------------------------

type HistoryEvent = NonNullable<Awaited<ReturnType<ReturnType<Client['workflow']['getHandle']>['fetchHistory']>>['events']>[number];

const msOf = (e: HistoryEvent): number => Number(e.eventTime?.seconds ?? 0) * 1000 + (e.eventTime?.nanos ?? 0) / 1e6;
const idOf = (id: unknown): string => String(id);

interface Activity {
  type: string;
  scheduled: number;
  started?: number;
  completed?: number;
  inputBytes: number;
  /** A case's id, read from its input. */
  caseId?: string;
}

/** Every activity of a history by its scheduled event id, with the times of its scheduled, started and completed events. */
function activitiesOf(events: HistoryEvent[]): Map<string, Activity> {
  const out = new Map<string, Activity>();
  for (const e of events) {
    const scheduled = e.activityTaskScheduledEventAttributes;
    if (scheduled) {
      const inputBytes = (scheduled.input?.payloads ?? []).reduce((sum, p) => sum + (p.data?.length ?? 0), 0);
      const type = scheduled.activityType?.name ?? '?';
      const first = scheduled.input?.payloads?.[0]?.data;
      const caseId = type === 'runCase' && first ? (JSON.parse(Buffer.from(first).toString('utf8')) as { case_id: string }).case_id : undefined;
      out.set(idOf(e.eventId), { type, scheduled: msOf(e), inputBytes, ...(caseId ? { caseId } : {}) });
    }
    const started = e.activityTaskStartedEventAttributes;
    if (started) out.get(idOf(started.scheduledEventId))!.started = msOf(e);
    const completed = e.activityTaskCompletedEventAttributes;
    if (completed) out.get(idOf(completed.scheduledEventId))!.completed = msOf(e);
  }
  return out;
}

/**
 * A slot's turnaround between two cases: each case the workflow starts after the first PARALLELISM takes
 * the slot of the earliest completed case not yet followed (the loop starts one case per case finished).
 */
function turnarounds(events: HistoryEvent[], activities: Map<string, Activity>): number[] {
  const freed: number[] = [];
  const out: number[] = [];
  let startedCases = 0;
  for (const e of events) {
    const scheduled = e.activityTaskScheduledEventAttributes;
    if (scheduled?.activityType?.name === 'runCase' && startedCases++ >= PARALLELISM) out.push(msOf(e) - freed.shift()!);
    const completed = e.activityTaskCompletedEventAttributes;
    if (completed && activities.get(idOf(completed.scheduledEventId))?.type === 'runCase') freed.push(msOf(e));
  }
  return out;
}

const p50 = (v: number[]) => (v.length ? `${percentile(v, 50).toFixed(1)} ms` : 'n/a');
const sum = (v: number[]) => v.reduce((a, b) => a + b, 0);

async function breakdown(client: Client, platform: Platform, round: PlatformRound): Promise<string[]> {
  const handle = client.workflow.getHandle(workflowIdFor(ORG, round.runId));
  const events = (await handle.fetchHistory()).events ?? [];
  const described = await handle.describe();
  const activities = activitiesOf(events);
  const cases = [...activities.values()].filter((a) => a.type === 'runCase');
  const publishes = [...activities.values()].filter((a) => a.type === 'publishRunEvents');
  const workflowStarted = msOf(events[0]);
  const firstCase = Math.min(...cases.map((a) => a.scheduled));
  const lastCase = Math.max(...cases.map((a) => a.completed ?? 0));

  // The workflow's turns: each task's start -> completed, by its started event.
  const taskStarts = new Map<string, number>();
  const taskTurns: number[] = [];
  for (const e of events) {
    if (e.workflowTaskStartedEventAttributes) taskStarts.set(idOf(e.eventId), msOf(e));
    const completed = e.workflowTaskCompletedEventAttributes;
    if (completed) taskTurns.push(msOf(e) - taskStarts.get(idOf(completed.startedEventId))!);
  }
  const inCase = round.durations;
  // The ledger row's created_at is when its INSERT ran: the split of the activity around the case's own work.
  const recorded = new Map(
    (await platform.query<{ key: string; at: number }>(`SELECT idempotency_key AS key, extract(epoch FROM created_at) * 1000 AS at FROM effect_ledger WHERE starts_with(idempotency_key, $1)`, [`${workflowIdFor(ORG, round.runId)}:`])).map((r) => [r.key, Number(r.at)]),
  );
  const atOf = (a: Activity) => recorded.get(`${workflowIdFor(ORG, round.runId)}:${a.caseId}`);
  const split = cases.filter((a) => atOf(a) !== undefined && round.byCase.has(a.caseId!));
  const beforeSolve = split.map((a) => atOf(a)! - a.started! - round.byCase.get(a.caseId!)!);
  const afterRecord = split.map((a) => a.completed! - atOf(a)!);
  const scheduleToStart = cases.map((a) => a.started! - a.scheduled);
  const startToClose = cases.map((a) => a.completed! - a.started!);
  const turnaround = turnarounds(events, activities);
  const cycle = percentile(scheduleToStart, 50) + percentile(startToClose, 50) + percentile(turnaround, 50);
  return [
    `where the time went in ${round.runId} (${cases.length} cases, ${round.seconds.toFixed(2)} s; Temporal history: ${events.length} events, ${((described.historySize ?? 0) / 1024 / 1024).toFixed(1)} MiB):`,
    `  POST /evals -> workflow started (gateway, Kafka, orchestrator, Temporal start)   ${(workflowStarted - round.postedAt).toFixed(0)} ms`,
    `  workflow started -> first case scheduled                                         ${(firstCase - workflowStarted).toFixed(0)} ms`,
    `  first case scheduled -> last case completed (the fan-out)                        ${(lastCase - firstCase).toFixed(0)} ms`,
    `  last case completed -> read model awaiting_review (publish, projector)           ${(round.reviewAt - lastCase).toFixed(0)} ms`,
    `  per case, p50: schedule-to-start ${p50(scheduleToStart)}, start-to-close ${p50(startToClose)}: the case's own solve+score ${p50(inCase)},`,
    `    the rest of the activity up to its ledger INSERT ${p50(beforeSolve)}, the INSERT's start -> completion in the history ${p50(afterRecord)} (${split.length} cases split);`,
    `    completed -> the slot's next case scheduled ${p50(turnaround)}; a slot's cycle ~${cycle.toFixed(0)} ms -> ${PARALLELISM} slots ~${((PARALLELISM * 1000) / cycle).toFixed(1)} cases/s`,
    // Not their schedule-to-start: a task scheduled while another is running is written with its start, so the history shows 0.
    `  workflow tasks: ${taskTurns.length}, p50 start-to-complete ${p50(taskTurns)} (the workflow's turn after a batch of completions)`,
    ...(publishes.length === 0
      ? [`  run events: sent by the workflow tasks themselves (no publishing activity in the history)`]
      : [
          `  publishRunEvents activities: ${publishes.length}, p50 scheduled -> completed ${p50(publishes.filter((a) => a.completed).map((a) => a.completed! - a.scheduled))}, ` +
            `inputs ${(sum(publishes.map((a) => a.inputBytes)) / 1024 / 1024).toFixed(1)} MiB in all, the largest ${(Math.max(...publishes.map((a) => a.inputBytes)) / 1024).toFixed(0)} KiB`,
          `    (every event carries the run's state, with every case's view in it)`,
        ]),
  ];
}

// ---------------------------------------------------------------------------------------------

const median = (v: number[]) => percentile(v, 50);

async function main(): Promise<void> {
  const n = Number(process.argv[2] ?? 200);
  const rounds = Number(process.argv[3] ?? 3);
  if (!Number.isInteger(n) || n < PARALLELISM || n > MAX_INLINE_CASES) throw new Error(`cases must be an integer from ${PARALLELISM} to ${MAX_INLINE_CASES} (one inline dataset), got ${process.argv[2]}`);
  if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`rounds must be a positive integer, got ${process.argv[3]}`);
  const platform = new Platform({ EVAL_PARALLELISM: String(PARALLELISM), EVAL_SLOTS: String(PARALLELISM) });
  await platform.start();
  // A 500-case eval's history comes back as one page of about 11 MiB (every event carries every case's view), over gRPC's 4 MiB default.
  const connection = await Connection.connect({ address: stackUrls().temporalAddress, channelArgs: { 'grpc.max_receive_message_length': 64 * 1024 * 1024 } });
  const temporal = new Client({ connection, namespace: stackUrls().namespace });
  try {
    // The solver's max_tokens when the eval names none is the gpu-worker's own setting, read as the worker reads it.
    const maxTokens = loadGpuWorkerConfig(platform.env('gpu-worker')).EVAL_MAX_TOKENS;
    const bare = createChatClient({ baseUrl: platform.model!.url, model: 'scripted', timeoutMs: 60_000 });
    const cases = benchCases(n);
    // Warm-up (not reported): the same dataset (stored once, then cached by the worker), and the bare client's connections.
    await platformRound(platform, cases, WARM_UP_CASES);
    await bareRound(bare, cases.slice(0, WARM_UP_CASES), maxTokens);

    const results = { platform: [] as PlatformRound[], bare: [] as Round[] };
    for (let r = 0; r < rounds; r++) {
      // The order flips every round, so neither side always runs first.
      const order = r % 2 === 0 ? (['platform', 'bare'] as const) : (['bare', 'platform'] as const);
      for (const side of order) {
        if (side === 'platform') results.platform.push(await platformRound(platform, cases));
        else results.bare.push(await bareRound(bare, cases, maxTokens));
        const last = side === 'platform' ? results.platform.at(-1)! : results.bare.at(-1)!;
        console.log(`round ${r + 1}, ${side.padEnd(8)} ${n} cases in ${last.seconds.toFixed(2)} s = ${(n / last.seconds).toFixed(1)} cases/s, p50 per case ${percentile(last.durations, 50).toFixed(1)} ms`);
      }
    }
    const rate = (rs: Round[]) => median(rs.map((x) => n / x.seconds));
    const perCase = (rs: Round[]) => median(rs.map((x) => percentile(x.durations, 50)));
    const platformRate = rate(results.platform);
    const bareRate = rate(results.bare);
    console.log(`\n${n} cases [answer: n], generate + exact, parallelism ${PARALLELISM}, max_tokens ${maxTokens}; ${rounds} alternating rounds, medians:`);
    console.log(`platform: POST /evals -> awaiting_review (EVAL_PARALLELISM=${PARALLELISM}, EVAL_SLOTS=${PARALLELISM})   ${platformRate.toFixed(1).padStart(7)} cases/s   p50 case duration_ms ${perCase(results.platform).toFixed(1)} ms`);
    console.log(`baseline: bare chat client, the same requests, ${PARALLELISM} at a time                  ${bareRate.toFixed(1).padStart(7)} cases/s   p50 call ${perCase(results.bare).toFixed(1)} ms`);
    console.log(`ratio platform/bare cases/s: ${(platformRate / bareRate).toFixed(3)}x (the platform takes ${(bareRate / platformRate).toFixed(1)}x the bare client's time)\n`);
    for (const line of await breakdown(temporal, platform, results.platform.at(-1)!)) console.log(line);
  } finally {
    await connection.close();
    await platform.stop();
  }
}

// Run as a script (npm run bench:evals).
if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
