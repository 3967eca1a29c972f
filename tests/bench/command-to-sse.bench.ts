/**
 * Publish -> first SSE event, measured from outside: a plain producer publishes `agent.start`, an
 * SSE client already listening... cannot be (the run does not exist yet), so the client connects
 * right after the publish is acknowledged and the clock stops at the first frame. Beside it, in the
 * same run, the baseline: a bare Kafka produce -> consume round trip on the same broker.
 *
 *   npm run bench:spine -- [runs=20]
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Kafka } from 'kafkajs';
import { Platform, uniqueId } from '../support/platform';
import { SseClient } from '../support/sse';
import { waitFor } from '../support/wait';

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** A bare produce -> consume round trip on `topic` (the baseline beside the spine figures). */
export async function kafkaRoundTrip(kafka: Kafka, topic: string, groupId: string, samples: number): Promise<number[]> {
  const consumer = kafka.consumer({ groupId });
  const producer = kafka.producer();
  const arrived = new Map<string, number>();
  await Promise.all([consumer.connect(), producer.connect()]);
  await consumer.subscribe({ topic, fromBeginning: false });
  await consumer.run({ eachMessage: async ({ message }) => void arrived.set(message.key?.toString() ?? '', performance.now()) });
  await waitFor('the baseline consumer to join', async () => {
    const key = `warm-${randomBytes(3).toString('hex')}`;
    await producer.send({ topic, messages: [{ key, value: '{}' }] });
    await new Promise((r) => setTimeout(r, 200));
    return arrived.has(key);
  }, 30_000, 10);
  const out: number[] = [];
  for (let i = 0; i < samples; i++) {
    const key = `rt-${i}-${randomBytes(3).toString('hex')}`;
    const t0 = performance.now();
    await producer.send({ topic, messages: [{ key, value: '{}' }] });
    const t1 = await waitFor('the echo', () => arrived.get(key), 10_000, 1);
    out.push(t1 - t0);
  }
  await Promise.all([consumer.disconnect(), producer.disconnect()]);
  return out;
}

/**
 * `runs` agents of two steps, one at a time: publish -> first SSE frame, and publish -> the stream's end.
 * The target is a test Platform or the compose stack (tests/support/compose.ts): anything that publishes
 * commands and serves the gateway; `org` and `headers` say whose runs they are and how to read them.
 */
export async function measureSpine(
  target: Pick<Platform, 'gatewayUrl' | 'publishCommand'>,
  runs: number,
  org = 'bench',
  headers: Record<string, string> = { 'X-Org': org },
  maxSteps = 2,
): Promise<{ toFirst: number[]; toDone: number[] }> {
  const toFirst: number[] = [];
  const toDone: number[] = [];
  for (let i = 0; i < runs; i++) {
    const runId = uniqueId('bench');
    const t0 = performance.now();
    await target.publishCommand({ command_id: uniqueId('c'), type: 'agent.start', org, run_id: runId, payload: { goal: 'measure me', max_steps: maxSteps } });
    const sse = await waitFor('the stream to open', async () => {
      const client = new SseClient(`${target.gatewayUrl}/runs/${runId}/events`, headers);
      await waitFor('headers', () => client.status !== 0 || client.ended, 5_000, 1);
      if (client.status === 200) return client;
      client.close();
      return undefined;
    }, 30_000, 5);
    await waitFor('the first event', () => sse.events().length > 0, 30_000, 1);
    toFirst.push(performance.now() - t0);
    await sse.finished();
    toDone.push(performance.now() - t0);
  }
  return { toFirst, toDone };
}

export const row = (name: string, v: number[]) =>
  `${name.padEnd(40)} p50 ${percentile(v, 50).toFixed(1).padStart(7)} ms   p95 ${percentile(v, 95).toFixed(1).padStart(7)} ms   max ${Math.max(...v).toFixed(1).padStart(7)} ms`;

/** The orchestrator restarted with `env` (the way new runs publish their events is read at each start). */
async function restartOrchestrator(platform: Platform, env: Record<string, string>): Promise<void> {
  platform.appEnv.orchestrator = env;
  await platform.stopApp('orchestrator');
  await platform.startApp('orchestrator');
}

async function main(): Promise<void> {
  const runs = Number(process.argv[2] ?? 20);
  const platform = new Platform();
  await platform.start();
  try {
    // Two rounds each of the three ways a run's events leave, alternated, pooled: carried by the run's
    // calls (the default), the publishing activity, and the workflow-task sink (earlier on the topic,
    // but not safe when a task is cut off after publishing; measured beside them).
    const ways = { carried: { toFirst: [] as number[], toDone: [] as number[] }, activity: { toFirst: [] as number[], toDone: [] as number[] }, 'workflow-task': { toFirst: [] as number[], toDone: [] as number[] } };
    const half = Math.max(1, Math.round(runs / 2));
    for (let round = 0; round < 2; round++) {
      for (const via of ['carried', 'activity', 'workflow-task'] as const) {
        await restartOrchestrator(platform, { AGENTRUN_RUN_EVENTS_VIA: via });
        // Two runs not counted: the first after a restart loads the workflow bundle and opens connections.
        await measureSpine(platform, 2);
        const measured = await measureSpine(platform, half);
        ways[via].toFirst.push(...measured.toFirst);
        ways[via].toDone.push(...measured.toDone);
      }
    }
    const baseline = await kafkaRoundTrip(platform.kafka, platform.topic('agentrun.run-events.v1'), `${platform.id}-baseline`, runs);
    console.log(`\n${2 * half} runs each way, one at a time, in alternating rounds (agent.start with max_steps=2: 4 events)`);
    console.log(row('publish -> first SSE event', ways.carried.toFirst));
    console.log(row('  (events by activity)', ways.activity.toFirst));
    console.log(row('  (events by workflow-task sink)', ways['workflow-task'].toFirst));
    console.log(row('publish -> SSE end (terminal done)', ways.carried.toDone));
    console.log(row('  (events by activity)', ways.activity.toDone));
    console.log(row('  (events by workflow-task sink)', ways['workflow-task'].toDone));
    console.log(row('baseline: bare Kafka produce -> consume', baseline));
    const p50 = (v: number[]) => percentile(v, 50);
    console.log(`ratio p50 first-event / Kafka round trip: ${(p50(ways.carried.toFirst) / p50(baseline)).toFixed(1)}x`);
    console.log(`ratio p50 first-event, carried / activity: ${(p50(ways.carried.toFirst) / p50(ways.activity.toFirst)).toFixed(2)}x; carried / workflow-task sink: ${(p50(ways.carried.toFirst) / p50(ways['workflow-task'].toFirst)).toFixed(2)}x`);
  } finally {
    await platform.stop();
  }
}

// Run as a script (npm run bench:spine); imported by the secure-profile benchmark.
if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
