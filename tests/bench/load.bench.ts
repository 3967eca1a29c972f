/**
 * Load: `agent.start` commands -> read model, open loop, on an isolated platform (own topics, task
 * queues, database; TOOL_PACE_MS=0), at a ladder of rates.
 *
 * Each step publishes small runs (scripted policy, max_steps=4) at a fixed rate for SECONDS seconds
 * (N = rate x SECONDS, at least 30), so a rate above what the platform sustains shows as a growing
 * backlog rather than a burst it absorbs: a timer schedules
 * every publish at t0 + i/rate, nobody waits for earlier runs (the sends themselves are not awaited
 * before the next is scheduled). For every run the clock starts just before its `send` and stops at:
 *
 *   - first event in the read model: the projector's NOTIFY naming the run (sent on commit), seen by
 *     a bare LISTEN client of the bench's own on the platform's database;
 *   - first event on SSE: at that NOTIFY (the run exists now, so the stream answers 200) the bench opens
 *     GET /runs/{id}/events on the gateway, for every run, and stops at its first frame;
 *   - terminal in the read model: the NOTIFY naming the run's final seq (its runs row's last_seq once
 *     the step is over; the row must then say `done`).
 *
 * A step holds with no loss when every run is `done`, its events in run_events are exactly 1..N
 * (N = the scripted shape of max_steps=4), the SSE stream delivered exactly 1..N (no gap, no repeat),
 * and every command got exactly one outcome on the command-results topic, `accepted`. The ladder
 * stops after a step that loses anything or whose p99 publish -> terminal exceeds BOUND_MS (the step
 * still counts for "no loss" if nothing was lost: a run later than DRAIN_MS counts as lost). Each step
 * also prints its throughput: N / (first publish -> last run terminal), beside the offered rate.
 *
 * Beside every step, in the same run and at the same rate and count, the baseline: a bare kafkajs
 * produce -> consume round trip, open loop, on a topic of the bench's own on the same broker.
 *
 * And the bare-Temporal baseline, a ladder of its own at the same rates and counts (it goes on after
 * the platform's stops, until it too misses the bound): the same number of runs of the same activity
 * shape on bare Temporal, no Kafka, no projector, no gateway. The shape is read from the histories of
 * 5 warm runs at 1/s: the activities a scripted run makes (the publish activity left out: that is the
 * platform's bookkeeping), in order, each taking its measured median run time, and the research
 * child where the run starts one (`bareAgentRun` in tests/bench/temporal-workload.workflows.ts, on a
 * Worker in this process with the SDK's default slots, as the platform's lanes run, and the GPU
 * lane's activities on a second Worker with the gpu-worker's 2 slots; started by a plain Temporal
 * client, open loop; the clock stops when the client has the result). Printed: each
 * ladder's runs/s at the highest rate it held with p99 terminal <= 10 s, and their ratio.
 *
 * Where the queue forms, measured during every step (tests/bench/load-probes.ts): command and
 * projector consumer lag, Temporal SDK slot use per lane, workflow-task and activity schedule-to-start
 * (from the SDK's histograms), CPU of every process involved (apps, Temporal server, Postgres, Kafka,
 * this process, the machine), Postgres backends and commits/s; and from a sample of the step's runs'
 * histories, each run's time line: publish -> workflow started -> closed -> terminal, workflow-task
 * and activity waits and run times (the bare runs' beside them).
 *
 *   npm run bench:load -- [rates=1,2,4,6,8,10,12,14,16,20,25] [seconds per step=20]
 */
import { request } from 'node:http';
import { performance } from 'node:perf_hooks';
import { Client as PgClient } from 'pg';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger, NativeConnection, Worker } from '@temporalio/worker';
import { TOPICS, type CommandOutcome } from '@agentrun/contracts';
import { addCounts, billableActions } from '../support/history-counts';
import { describeShape, medianShape, percentile, pool, runTimeline, Sampler, spread, type RunTimeline, type ShapeStep, type StepProbes } from './load-probes';
import { scriptedRunShape } from '../support/invariants';
import { Platform, uniqueId } from '../support/platform';
import { stackUrls } from '../support/stack-env';
import { waitFor } from '../support/wait';

const ORG = 'bench';
const MAX_STEPS = 4;
const RATES = (process.argv[2] ?? '1,2,4,6,8,10,12,14,16,20,25').split(',').map(Number);
const SECONDS_PER_STEP = Number(process.argv[3] ?? 20);
const BOUND_MS = 10_000; // p99 publish -> terminal above this ends the ladder
const DRAIN_MS = 90_000; // a run not `done` this long after its step's last publish is lost
const CHANNEL = 'agentrun_run_events';

/** Calls `fire(i)` at t0 + i * 1000/rate for i < n, on absolute times (no drift); resolves after the last call. */
async function openLoop(n: number, rate: number, fire: (i: number) => void): Promise<void> {
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const due = t0 + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    fire(i);
  }
}

interface RunTrack {
  runId: string;
  commandId: string;
  published: number;
  sendError?: string;
  firstRow?: number;
  notified: Map<number, number>; // seq -> first NOTIFY naming it
  firstSse?: number;
  sseSeqs: number[];
  sseStatus?: number;
  sseEnded?: boolean;
}

/** Opens the run's SSE stream and records the time of its first event frame and every seq it sends. */
function followSse(gatewayUrl: string, track: RunTrack): void {
  const req = request(`${gatewayUrl}/runs/${track.runId}/events`, { headers: { Accept: 'text/event-stream', 'X-Org': ORG } }, (res) => {
    track.sseStatus = res.statusCode ?? 0;
    res.setEncoding('utf8');
    let buffer = '';
    res.on('data', (chunk: string) => {
      buffer += chunk;
      let cut: number;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const id = /^id: ?(\d+)$/m.exec(block);
        if (!id) continue;
        track.firstSse ??= performance.now();
        track.sseSeqs.push(Number(id[1]));
      }
    });
    res.on('end', () => (track.sseEnded = true));
    res.on('error', () => (track.sseEnded = true));
  });
  req.on('error', () => (track.sseEnded = true));
  req.end();
}

/** A bare produce -> consume round trip at `rate`, open loop, n messages, on the bench's own topic. */
async function kafkaBaseline(platform: Platform, topic: string, n: number, rate: number): Promise<{ rtts: number[]; lost: number }> {
  const producer = platform.kafka.producer({ allowAutoTopicCreation: false });
  const consumer = platform.kafka.consumer({ groupId: `${platform.id}-baseline-${rate}` });
  const arrived = new Map<string, number>();
  await Promise.all([producer.connect(), consumer.connect()]);
  await consumer.subscribe({ topic, fromBeginning: false });
  await consumer.run({ eachMessage: async ({ message }) => void arrived.set(message.key?.toString() ?? '', performance.now()) });
  await waitFor('the baseline consumer to join', async () => {
    const key = uniqueId('warm');
    await producer.send({ topic, messages: [{ key, value: '{}' }] });
    await new Promise((r) => setTimeout(r, 200));
    return arrived.has(key);
  }, 30_000, 10);
  const sent = new Map<string, number>();
  const tag = uniqueId(`rt${rate}`);
  await openLoop(n, rate, (i) => {
    const key = `${tag}-${i}`;
    sent.set(key, performance.now());
    void producer.send({ topic, messages: [{ key, value: '{}' }] });
  });
  await waitFor('the baseline echoes', () => [...sent.keys()].every((k) => arrived.has(k)), 15_000, 5).catch(() => undefined);
  const rtts = [...sent].filter(([k]) => arrived.has(k)).map(([k, t]) => arrived.get(k)! - t);
  await Promise.all([consumer.disconnect(), producer.disconnect()]);
  return { rtts, lost: sent.size - rtts.length };
}

async function main(): Promise<void> {
  const expected = scriptedRunShape(MAX_STEPS).events;
  // The bench's one org holds every run in flight and a stream on each: its quotas (20 streams, 100
  // active runs by default) would refuse them long before the platform runs out of anything else.
  const platform = new Platform({
    TOOL_PACE_MS: '0',
    AGENTRUN_QUOTAS: JSON.stringify({ default: { sse_streams: 100_000, active_runs: 100_000 } }),
    GATEWAY_SSE_MAX_STREAMS: '100000',
  });
  await platform.start();
  const listener = new PgClient({ connectionString: stackUrls().databaseUrl(platform.database) });
  const tracks = new Map<string, RunTrack>();
  let starNotices = 0;
  const connection = await Connection.connect({ address: stackUrls().temporalAddress });
  const client = new Client({ connection, namespace: stackUrls().namespace });
  let bareConnection: NativeConnection | undefined;
  const bareWorkers: Worker[] = [];
  let bareRunning: Promise<unknown> | undefined;
  try {
    // The LISTEN side: the projector's commit notices, as the gateway's hub receives them.
    await listener.connect();
    const onRun = (runId: string, seq: number, at: number) => {
      const track = tracks.get(runId);
      if (!track) return;
      if (!track.notified.has(seq)) track.notified.set(seq, at);
      if (track.firstRow === undefined) {
        track.firstRow = at;
        followSse(platform.gatewayUrl, track);
      }
    };
    listener.on('notification', (msg) => {
      const at = performance.now();
      if (msg.channel !== CHANNEL) return;
      if (msg.payload === '*') {
        // Too many runs for one notice: ask the read model which runs moved.
        starNotices += 1;
        const open = [...tracks.values()].filter((t) => !t.notified.has(expected)).map((t) => t.runId);
        void listener.query<{ run_id: string; last_seq: number }>('SELECT run_id, last_seq FROM runs WHERE org = $1 AND run_id = ANY($2)', [ORG, open]).then((r) => r.rows.forEach((row) => onRun(row.run_id, Number(row.last_seq), at)));
        return;
      }
      for (const [org, runId, seq] of JSON.parse(msg.payload ?? '[]') as [string, string, number][]) if (org === ORG) onRun(runId, Number(seq), at);
    });
    await listener.query(`LISTEN ${CHANNEL}`);
    const outcomes = await platform.follow<CommandOutcome>(TOPICS.commandResults);

    const baselineTopic = platform.topic('bench.baseline');
    const admin = platform.kafka.admin();
    await admin.connect();
    await admin.createTopics({ waitForLeaders: true, topics: [{ topic: baselineTopic, numPartitions: 3, replicationFactor: 1 }] });
    await admin.disconnect();

    const startRuns = async (label: string, n: number, rate: number): Promise<RunTrack[]> => {
      const mine: RunTrack[] = [];
      await openLoop(n, rate, (i) => {
        const track: RunTrack = { runId: uniqueId(`${label}${i}`), commandId: uniqueId('c'), published: 0, notified: new Map(), sseSeqs: [] };
        tracks.set(track.runId, track);
        mine.push(track);
        track.published = performance.now();
        platform
          .publishCommand({ command_id: track.commandId, type: 'agent.start', org: ORG, run_id: track.runId, payload: { goal: `load ${track.runId}`, max_steps: MAX_STEPS } })
          .catch((err: Error) => (track.sendError = err.message));
      });
      const lastPublish = performance.now();
      // Wait for every run to be done in the read model and its stream to end, or for the drain bound.
      for (;;) {
        const rows = await platform.query<{ n: string }>(`SELECT count(*) AS n FROM runs WHERE org = $1 AND run_id = ANY($2) AND status IN ('done', 'failed', 'cancelled')`, [ORG, mine.map((t) => t.runId)]);
        const terminal = Number(rows[0].n);
        if (terminal === n && mine.every((t) => t.sseEnded || t.sendError)) break;
        if (performance.now() - lastPublish > DRAIN_MS) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      return mine;
    };

    // Warm-up, not reported: every app past its first message. Then 5 runs at 1/s, warm, whose
    // histories give the bare baseline its shape (cold first runs take several times as long).
    await startRuns('warm', 3, 1);
    const calibration = await startRuns('shape', 5, 1);
    const warmLines = await Promise.all(calibration.map((t) => runTimeline(client, `${ORG}/${t.runId}`)));
    const shape: ShapeStep[] = medianShape(warmLines.map((l) => l.shape));

    // The bare baseline's workers, in this process, on task queues of their own: one for everything
    // (the SDK's default slots, as the platform's lanes run), one for what ran on the GPU lane, with
    // the gpu-worker's default GPU_SLOTS (2) slots.
    const bareQueue = `${platform.prefix}bare`;
    const bareGpuQueue = `${platform.prefix}bare-gpu`;
    const bundle = await bundleWorkflowCode({ workflowsPath: require.resolve('./temporal-workload.workflows'), logger: new DefaultLogger('WARN') });
    bareConnection = await NativeConnection.connect({ address: stackUrls().temporalAddress });
    const work = async (_type: string, ms: number) => (ms > 0 ? new Promise<number>((r) => setTimeout(() => r(1), ms)) : 1);
    bareWorkers.push(await Worker.create({ connection: bareConnection, namespace: stackUrls().namespace, taskQueue: bareQueue, workflowBundle: bundle, activities: { work } }));
    bareWorkers.push(await Worker.create({ connection: bareConnection, namespace: stackUrls().namespace, taskQueue: bareGpuQueue, activities: { work }, maxConcurrentActivityTaskExecutions: 2 }));
    bareRunning = Promise.all(bareWorkers.map((w) => w.run()));
    const bareWarm = await bareStep(client, bareQueue, bareGpuQueue, shape, 3, 1, 'bwarm');
    const bareWarmLines = await Promise.all(bareWarm.runs.map((r) => runTimeline(client, r.id)));

    // Idle: what every process uses with no run going (the stack's servers are shared with other work on the machine).
    const idleSampler = new Sampler(appPorts(platform), platform.query.bind(platform), platform.database);
    await idleSampler.start();
    await new Promise((r) => setTimeout(r, 5_000));
    const idle = await idleSampler.stop();

    console.log(`\nLoad: agent.start (scripted, max_steps=${MAX_STEPS}: ${expected} events per run, TOOL_PACE_MS=0), open loop; isolated platform ${platform.id}`);
    console.log(`every run followed on SSE from the projector's first NOTIFY naming it; ladder stops on any loss or p99 publish -> terminal > ${BOUND_MS / 1000} s`);
    console.log(`bare-Temporal baseline, per run (median of 5 calibration runs at 1/s, publish activities left out): ${describeShape(shape)}`);
    const perRun = (lines: RunTimeline[]) => {
      const c = addCounts(...lines.map((l) => l.counts));
      const a = billableActions(c);
      const k = Math.max(1, lines.length);
      return `${(c.events / k).toFixed(1)} history events, ${(c.workflowTasks.completed / k).toFixed(1)} workflow tasks, ${(c.activities.scheduled / k).toFixed(1)} activities, ${(c.upserts.events / k).toFixed(1)} upserts, ${(a.total / k).toFixed(1)} billable actions`;
    };
    console.log(`per run (its executions and children, the calibration runs): platform ${perRun(warmLines)} | bare ${perRun(bareWarmLines)}`);
    console.log(`CPU cores, idle (5 s, no run going; the stack's servers serve other work too): ${Object.entries(idle.cpu).map(([k, v]) => `${k} ${v.toFixed(2)}`).join(', ')}`);
    const header = `${'rate/s'.padStart(6)} ${'N'.padStart(3)} | ${'1st row p50/p99'.padStart(17)} | ${'1st SSE p50/p99'.padStart(17)} | ${'terminal p50/p99'.padStart(17)} | ${'Kafka p50/p99'.padStart(15)} | ${'SSE/Kafka p50,p99'.padStart(17)} | done/s | no loss`;
    const ms = (v: number) => (Number.isNaN(v) ? '-' : v.toFixed(0));
    const pair = (v: number[]) => `${ms(percentile(v, 50))} / ${ms(percentile(v, 99))} ms`;
    let held: number | undefined; // no loss and within the bound
    let lossless: number | undefined; // no loss, whatever the latency
    let platformGoing = true;
    let bareGoing = true;
    let bareHeld: number | undefined;
    const platformRate = new Map<number, number>(); // done/s per rate
    const bareRate = new Map<number, number>();
    const problems: string[] = [];
    const summary: string[] = [];

    for (const rate of RATES) {
      if (!platformGoing && !bareGoing) break;
      const n = Math.max(30, Math.round(rate * SECONDS_PER_STEP));
      console.log(`\n--- ${rate}/s, N=${n}`);

      // The bare-Temporal baseline at this rate and count.
      let bareProbes: StepProbes | undefined;
      let bareLines: Timelines | undefined;
      if (bareGoing) {
        const sampler = new Sampler(appPorts(platform), platform.query.bind(platform), platform.database);
        await sampler.start();
        const bare = await bareStep(client, bareQueue, bareGpuQueue, shape, n, rate, `b${rate}-`);
        bareProbes = await sampler.stop();
        const over = percentile(bare.latencies, 99) > BOUND_MS;
        bareRate.set(rate, bare.throughput);
        console.log(`bare Temporal: start -> result ${pair(bare.latencies)} (p50/p99), ${bare.throughput.toFixed(1)} runs/s done, ${bare.failed} failed${over ? `, p99 > ${BOUND_MS / 1000} s` : ''}`);
        if (bare.failed > 0 || over) bareGoing = false;
        else bareHeld = rate;
        bareLines = timelines(await pool(spread(bare.runs, HISTORY_SAMPLE), 4, async (r) => ({ line: await runTimeline(client, r.id).catch(() => undefined), from: r.wall0, to: r.wallEnd })));
      }
      if (!platformGoing) {
        if (bareProbes && bareLines) printProbes(rate, undefined, bareProbes, undefined, bareLines);
        continue;
      }

      const baseline = await kafkaBaseline(platform, baselineTopic, n, rate);
      const sampler = new Sampler(appPorts(platform), platform.query.bind(platform), platform.database);
      await sampler.start();
      const mine = await startRuns(`r${rate}-`, n, rate);
      const probes = await sampler.stop();

      // Invariants, from the read model, the SSE streams and the outcome topic.
      const ids = mine.map((t) => t.runId);
      const runs = await platform.query<{ run_id: string; status: string; last_seq: number }>('SELECT run_id, status, last_seq FROM runs WHERE org = $1 AND run_id = ANY($2)', [ORG, ids]);
      const events = await platform.query<{ run_id: string; n: string; d: string; lo: number; hi: number }>(
        'SELECT run_id, count(*) AS n, count(DISTINCT seq) AS d, min(seq) AS lo, max(seq) AS hi FROM run_events WHERE org = $1 AND run_id = ANY($2) GROUP BY run_id',
        [ORG, ids],
      );
      await waitFor('an outcome for every command', () => mine.every((t) => outcomes.some((o) => o.value.command_id === t.commandId)), 10_000, 100).catch(() => undefined);
      const runById = new Map(runs.map((r) => [r.run_id, r]));
      const eventsById = new Map(events.map((e) => [e.run_id, e]));
      const stepProblems: string[] = [];
      const toRow: number[] = [];
      const toSse: number[] = [];
      const toDone: number[] = [];
      const terminalAt = new Map<string, number>();
      let lastTerminal = 0;
      for (const t of mine) {
        const run = runById.get(t.runId);
        const ev = eventsById.get(t.runId);
        const mineOutcomes = outcomes.filter((o) => o.value.command_id === t.commandId);
        if (t.sendError) stepProblems.push(`${t.runId}: publish failed: ${t.sendError}`);
        if (run?.status !== 'done') stepProblems.push(`${t.runId}: status ${run?.status ?? 'missing'}`);
        if (!ev || Number(ev.n) !== expected || Number(ev.d) !== expected || ev.lo !== 1 || ev.hi !== expected || run?.last_seq !== expected)
          stepProblems.push(`${t.runId}: read model events n=${ev?.n} distinct=${ev?.d} ${ev?.lo}..${ev?.hi}, last_seq ${run?.last_seq}, want 1..${expected}`);
        if (t.sseSeqs.join(',') !== Array.from({ length: expected }, (_, i) => i + 1).join(','))
          stepProblems.push(`${t.runId}: SSE (status ${t.sseStatus}) sent seqs [${t.sseSeqs.join(',')}]`);
        if (mineOutcomes.length !== 1 || mineOutcomes[0].value.outcome !== 'accepted')
          stepProblems.push(`${t.runId}: ${mineOutcomes.length} outcome(s) [${mineOutcomes.map((o) => o.value.outcome).join(',')}]`);
        if (t.firstRow !== undefined) toRow.push(t.firstRow - t.published);
        if (t.firstSse !== undefined) toSse.push(t.firstSse - t.published);
        const at = run ? t.notified.get(run.last_seq) : undefined;
        if (at !== undefined) {
          toDone.push(at - t.published);
          terminalAt.set(t.runId, at);
          lastTerminal = Math.max(lastTerminal, at);
        }
      }
      if (baseline.lost > 0) stepProblems.push(`baseline: ${baseline.lost} Kafka message(s) not echoed`);
      const sseRatio = `${(percentile(toSse, 50) / percentile(baseline.rtts, 50)).toFixed(1)}x, ${(percentile(toSse, 99) / percentile(baseline.rtts, 99)).toFixed(1)}x`;
      const throughput = toDone.length / ((lastTerminal - mine[0].published) / 1000);
      platformRate.set(rate, throughput);
      const ok = stepProblems.length === 0;
      const overBound = percentile(toDone, 99) > BOUND_MS;
      const row = `${String(rate).padStart(6)} ${String(n).padStart(3)} | ${pair(toRow).padStart(17)} | ${pair(toSse).padStart(17)} | ${pair(toDone).padStart(17)} | ${pair(baseline.rtts).padStart(15)} | ${sseRatio.padStart(17)} | ${throughput.toFixed(1).padStart(6)} | ${ok ? 'yes' : `NO (${stepProblems.length} problem(s))`}${overBound ? `, p99 terminal > ${BOUND_MS / 1000} s` : ''}`;
      console.log(header);
      console.log(row);
      summary.push(row);
      const sampled = spread(mine.filter((t) => terminalAt.has(t.runId)), HISTORY_SAMPLE);
      const lines = timelines(
        await pool(sampled, 4, async (t) => ({ line: await runTimeline(client, `${ORG}/${t.runId}`).catch(() => undefined), from: wall(t.published), to: wall(terminalAt.get(t.runId)!) })),
      );
      printProbes(rate, probes, bareProbes, lines, bareLines);
      if (!ok) {
        problems.push(...stepProblems.map((p) => `rate ${rate}/s: ${p}`));
        platformGoing = false;
        continue;
      }
      lossless = rate;
      if (overBound) {
        platformGoing = false;
        continue;
      }
      held = rate;
    }
    console.log(`\nplatform, every step:`);
    console.log(header);
    for (const row of summary) console.log(row);
    if (starNotices > 0) console.log(`(${starNotices} NOTIFY '*' notice(s): those times are when the bench re-read the runs table)`);
    for (const p of problems.slice(0, 20)) console.log(`  ${p}`);
    if (problems.length > 20) console.log(`  ... and ${problems.length - 20} more`);
    const top = (rate: number | undefined) => (rate === undefined ? 'none' : `${rate} commands/s${rate === RATES.at(-1) ? ' (the top of the ladder: not a limit)' : ''}`);
    console.log(`highest rate with no loss: ${top(lossless)}`);
    console.log(`highest rate held with no loss and p99 publish -> terminal <= ${BOUND_MS / 1000} s: ${top(held)}`);
    const p = held === undefined ? NaN : platformRate.get(held)!;
    const b = bareHeld === undefined ? NaN : bareRate.get(bareHeld)!;
    console.log(
      `runs/s at p99 terminal <= ${BOUND_MS / 1000} s: platform ${p.toFixed(1)} (at ${top(held)}) | bare Temporal ${b.toFixed(1)} (at ${top(bareHeld)}) | platform / bare = ${(p / b).toFixed(2)}x (target >= 0.5x)`,
    );
    if (lossless === undefined) process.exitCode = 1;
  } finally {
    await listener.end().catch(() => undefined);
    for (const w of bareWorkers) if (w.getState() === 'RUNNING') w.shutdown();
    await bareRunning?.catch(() => undefined);
    await bareConnection?.close().catch(() => undefined);
    await connection.close().catch(() => undefined);
    await platform.stop();
  }
}

const HISTORY_SAMPLE = 40; // runs per step whose histories are read for the time lines

/** A performance.now() time as ms since the epoch (history event times are wall-clock). */
const wall = (t: number) => performance.timeOrigin + t;

/** The services whose /metrics the sampler reads. */
function appPorts(platform: Platform): Record<string, number> {
  return { orchestrator: platform.ports.orchestrator, 'gpu-worker': platform.ports['gpu-worker'], projector: platform.ports.projector };
}

interface BareResult {
  runs: { id: string; wall0: number; wallEnd: number }[];
  latencies: number[];
  throughput: number;
  failed: number;
}

/** `n` bare runs of `shape` started at `rate`, open loop, by a plain client; each clock stops when the client has the result. */
async function bareStep(client: Client, taskQueue: string, gpuQueue: string, shape: ShapeStep[], n: number, rate: number, label: string): Promise<BareResult> {
  const runs: { id: string; t0: number; wall0: number; end?: number; failed?: string }[] = [];
  let settled = 0;
  await openLoop(n, rate, (i) => {
    const r: (typeof runs)[number] = { id: uniqueId(`${label}${i}`), t0: performance.now(), wall0: Date.now() };
    runs.push(r);
    void client.workflow
      .start('bareAgentRun', { taskQueue, workflowId: r.id, args: [shape, gpuQueue] })
      .then((h) => h.result())
      .then(
        () => void (r.end = performance.now()),
        (err: Error) => void (r.failed = err.message),
      )
      .finally(() => (settled += 1));
  });
  const lastStart = performance.now();
  while (settled < n && performance.now() - lastStart < DRAIN_MS) await new Promise((r) => setTimeout(r, 50));
  const done = runs.filter((r) => r.end !== undefined);
  const lastEnd = Math.max(...done.map((r) => r.end!));
  return {
    runs: done.map((r) => ({ id: r.id, wall0: r.wall0, wallEnd: wall(r.end!) })),
    latencies: done.map((r) => r.end! - r.t0),
    throughput: done.length / ((lastEnd - runs[0].t0) / 1000),
    failed: n - done.length,
  };
}

/** A step's sampled runs' time lines, pooled: each run's segments and every task's wait and run time. */
interface Timelines {
  runs: number;
  /** publish (or start call) -> workflow started, started -> closed, closed -> terminal (or result), ms. */
  toStart: number[];
  inWorkflow: number[];
  toTerminal: number[];
  wftWait: number[];
  wftRun: number[];
  wftPerRun: number;
  activities: Map<string, { wait: number[]; run: number[] }>;
}

function timelines(items: { line: RunTimeline | undefined; from: number; to: number }[]): Timelines {
  const out: Timelines = { runs: 0, toStart: [], inWorkflow: [], toTerminal: [], wftWait: [], wftRun: [], wftPerRun: NaN, activities: new Map() };
  for (const { line, from, to } of items) {
    if (!line) continue;
    out.runs += 1;
    out.toStart.push(line.started - from);
    if (Number.isFinite(line.closed)) {
      out.inWorkflow.push(line.closed - line.started);
      out.toTerminal.push(to - line.closed);
    }
    out.wftWait.push(...line.wft.wait);
    out.wftRun.push(...line.wft.run);
    for (const [type, a] of line.activities) {
      const entry = out.activities.get(type) ?? { wait: [], run: [] };
      entry.wait.push(...a.wait);
      entry.run.push(...a.run);
      out.activities.set(type, entry);
    }
  }
  out.wftPerRun = out.wftWait.length / Math.max(1, out.runs);
  return out;
}

/** The step's probes and time lines, platform beside bare. */
function printProbes(rate: number, p: StepProbes | undefined, b: StepProbes | undefined, pl: Timelines | undefined, bl: Timelines | undefined): void {
  const f = (v: number, d = 0) => (Number.isFinite(v) ? v.toFixed(d) : '-');
  const pp = (v: number[]) => `${f(percentile(v, 50))}/${f(percentile(v, 99))}`;
  const line = (who: string, t: Timelines) => {
    const acts = [...t.activities.entries()].map(([type, a]) => `${type} wait ${pp(a.wait)} run ${pp(a.run)}`).join('; ');
    console.log(
      `  time line ${who} (${t.runs} runs, ms p50/p99): to workflow start ${pp(t.toStart)} | in workflow ${pp(t.inWorkflow)} | close -> ${who === 'platform' ? 'terminal NOTIFY' : 'client result'} ${pp(t.toTerminal)}` +
        ` | workflow tasks ${f(t.wftPerRun, 1)}/run, wait ${pp(t.wftWait)} run ${pp(t.wftRun)} | ${acts}`,
    );
  };
  if (pl) line('platform', pl);
  if (bl) line('bare', bl);
  if (p) {
    const slots = Object.entries(p.slots)
      .filter(([, s]) => Number.isFinite(s.max))
      .map(([k, s]) => `${k} max ${f(s.max)} mean ${f(s.mean, 1)}${s.available !== undefined ? ` (free at end ${f(s.available)})` : ''}`)
      .join('; ');
    const s2s = (r: Record<string, number>) => Object.entries(r).map(([app, v]) => `${app} ${f(v, 1)}`).join(', ') || '-';
    console.log(`  queue probes at ${rate}/s (platform step): command lag max ${f(p.commandLag.max)} mean ${f(p.commandLag.mean, 1)} | projector lag max ${f(p.projectorLag.max)} mean ${f(p.projectorLag.mean, 1)}`);
    console.log(`    slots used: ${slots || '-'}`);
    console.log(`    SDK schedule-to-start mean ms: workflow tasks ${s2s(p.wftScheduleToStartMs)}; activities ${s2s(p.activityScheduleToStartMs)}`);
    console.log(`    Postgres (platform database): active backends max ${f(p.pg.activeMax)} mean ${f(p.pg.activeMean, 1)}, lock waits max ${f(p.pg.lockWaitMax)}, ${f(p.pg.commitsPerS)} commits/s`);
    if (pl) {
      const inFlight = (v: number[]) => f((v.reduce((s, x) => s + x, 0) / Math.max(1, v.length)) * (rate / 1000), 2);
      console.log(`    runs in flight (Little: rate x mean time): command path ${inFlight(pl.toStart)}, workflow ${inFlight(pl.inWorkflow)}, after close ${inFlight(pl.toTerminal)}`);
    }
  }
  const cpu = (c: StepProbes) => Object.entries(c.cpu).map(([k, v]) => `${k} ${f(v, 2)}`).join(', ');
  if (p) console.log(`  CPU cores, platform step: ${cpu(p)}`);
  if (b) console.log(`  CPU cores, bare step:     ${cpu(b)}`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
