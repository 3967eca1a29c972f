/**
 * What tracing costs, in one run: two isolated platforms side by side, one with tracing off (no OTEL_*
 * settings) and one exporting every span over OTLP/HTTP to a receiver in this process, measured in
 * alternating rounds (the order flips each round, so drift on a shared machine falls on both):
 *
 *   - publish -> first SSE frame, one run of 2 steps at a time (the spine, as in bench:spine), p50;
 *   - agent steps/s: `agentRuns` scripted runs of `agentSteps` steps started at once (as bench:agent (c)).
 *
 * Commands carry no traceparent, so on the traced platform every run starts a trace at the consumer and
 * everything after is recorded: the consumer, the workflow and its activities, each publish, the
 * projector's batches, every SSE frame.
 *
 *   npm run bench:telemetry -- [rounds=3] [spineRuns=6] [agentRuns=8] [agentSteps=20]
 */
import { performance } from 'node:perf_hooks';
import { OtlpReceiver } from '../support/otlp-receiver';
import { Platform, uniqueId } from '../support/platform';
import { waitFor } from '../support/wait';
import { measureSpine, percentile } from './command-to-sse.bench';

const ORG = 'bench';

interface Figures {
  firstFrame: number[];
  steps: number;
  agentMs: number;
}

async function agentRate(platform: Platform, runs: number, steps: number): Promise<number> {
  const runIds = Array.from({ length: runs }, (_, i) => uniqueId(`par${i}`));
  const t0 = performance.now();
  await platform.publishCommands(
    runIds.map((id) => ({ key: id, value: JSON.stringify({ command_id: uniqueId('c'), type: 'agent.start', org: ORG, run_id: id, payload: { goal: `measure ${id}`, max_steps: steps } }) })),
  );
  const outcome = await waitFor(`${runs} runs of ${steps} steps to finish`, async () => {
    const rows = await platform.query<{ run_id: string; status: string }>('SELECT run_id, status FROM runs WHERE org = $1 AND run_id = ANY($2)', [ORG, runIds]);
    const bad = rows.find((r) => r.status === 'failed' || r.status === 'cancelled');
    if (bad) return `run ${bad.run_id} ended ${bad.status}`;
    return rows.length === runIds.length && rows.every((r) => r.status === 'done') && 'done';
  }, 600_000, 20);
  if (outcome !== 'done') throw new Error(outcome);
  return performance.now() - t0;
}

async function main(): Promise<void> {
  const [rounds, spineRuns, agentRuns, agentSteps] = [3, 6, 8, 20].map((fallback, i) => Number(process.argv[2 + i] ?? fallback));
  // The receiver only counts what arrives: the bench measures the platform's cost, not a collector's.
  const receiver = await OtlpReceiver.start({ decode: false });
  const configs = [
    { name: 'tracing off', platform: new Platform() },
    { name: 'tracing exported (OTLP/HTTP)', platform: new Platform({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url }) },
  ];
  const figures = new Map<string, Figures>(configs.map((c) => [c.name, { firstFrame: [], steps: 0, agentMs: 0 }]));
  try {
    for (const { platform } of configs) await platform.start();
    // Warm-up (not reported): workers, producers, projector and gateway past their first message.
    for (const { platform } of configs) {
      await measureSpine(platform, 2, ORG);
      await agentRate(platform, 2, 4);
    }
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? configs : [...configs].reverse();
      for (const { name, platform } of order) {
        const f = figures.get(name)!;
        const { toFirst } = await measureSpine(platform, spineRuns, ORG);
        f.firstFrame.push(...toFirst);
        const ms = await agentRate(platform, agentRuns, agentSteps);
        f.agentMs += ms;
        f.steps += agentRuns * agentSteps;
        console.log(
          `round ${round + 1}/${rounds} ${name.padEnd(30)} first frame p50 ${percentile(toFirst, 50).toFixed(1).padStart(6)} ms, agent ${((agentRuns * agentSteps) / (ms / 1000)).toFixed(1).padStart(5)} steps/s; exports received so far ${receiver.requests} (${(receiver.bytes / 1024).toFixed(0)} KiB)`,
        );
      }
    }
    const [off, on] = configs.map((c) => figures.get(c.name)!);
    const p50 = (f: Figures) => percentile(f.firstFrame, 50);
    const rate = (f: Figures) => f.steps / (f.agentMs / 1000);
    console.log(`\n${rounds} alternating rounds; spine: ${spineRuns} runs of 2 steps one at a time per round; agent: ${agentRuns} runs x ${agentSteps} steps at once per round`);
    for (const c of configs) {
      const f = figures.get(c.name)!;
      console.log(`${c.name.padEnd(30)} publish -> first SSE frame p50 ${p50(f).toFixed(1).padStart(7)} ms (n=${f.firstFrame.length})   agent ${rate(f).toFixed(1).padStart(6)} steps/s (${f.steps} steps)`);
    }
    console.log(`exported to the receiver: ${receiver.requests} requests, ${(receiver.bytes / 1024).toFixed(0)} KiB of OTLP JSON (${receiver.refused} refused)`);
    console.log(`overhead of tracing: first frame p50 ${((p50(on) / p50(off) - 1) * 100).toFixed(1)}% (ratio ${(p50(on) / p50(off)).toFixed(3)}), agent steps/s ${((1 - rate(on) / rate(off)) * 100).toFixed(1)}% (ratio ${(rate(on) / rate(off)).toFixed(3)})`);
  } finally {
    for (const { platform } of configs) await platform.stop();
    await receiver.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
