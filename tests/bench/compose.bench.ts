/**
 * Publish -> first SSE event on the compose stack (docker-compose.yml under Podman or Docker, every
 * service in its container, reached through published ports) beside the native stack (the same apps
 * as host processes on the native servers), in the same run, in alternating rounds so the machine's
 * noise falls on both. Each side also gets its bare Kafka produce -> consume round trip as a baseline.
 *
 *   npm run bench:compose -- [runs=20]
 *
 * tests/compose/run.sh --bench brings the compose stack up (and the native stack, when it is down),
 * runs this, and removes the compose stack afterwards.
 */
import { TOPICS } from '@agentrun/contracts';
import { ComposeStack } from '../support/compose';
import { Platform } from '../support/platform';
import { kafkaRoundTrip, measureSpine, percentile, row } from './command-to-sse.bench';

async function main(): Promise<void> {
  const runs = Number(process.argv[2] ?? 20);
  const rounds = 4;
  const per = Math.max(1, Math.ceil(runs / rounds));
  const compose = new ComposeStack();
  const native = new Platform();
  await native.start();
  try {
    // One warm-up run each: the first run of a fresh stack pays for connections and caches.
    await measureSpine(compose, 1, compose.org, compose.auth);
    await measureSpine(native, 1);
    const first = { compose: [] as number[], native: [] as number[] };
    const done = { compose: [] as number[], native: [] as number[] };
    for (let r = 0; r < rounds; r++) {
      const c = await measureSpine(compose, per, compose.org, compose.auth);
      const n = await measureSpine(native, per);
      first.compose.push(...c.toFirst);
      done.compose.push(...c.toDone);
      first.native.push(...n.toFirst);
      done.native.push(...n.toDone);
    }
    const kafkaCompose = await kafkaRoundTrip(compose.kafka, TOPICS.runEvents, `compose-bench-${Date.now()}`, per * rounds);
    const kafkaNative = await kafkaRoundTrip(native.kafka, native.topic(TOPICS.runEvents), `${native.id}-baseline`, per * rounds);
    console.log(`\n${per * rounds} runs per stack in ${rounds} alternating rounds (agent.start, max_steps=2: 4 events)`);
    console.log(row('compose: publish -> first SSE event', first.compose));
    console.log(row('native:  publish -> first SSE event', first.native));
    console.log(row('compose: publish -> SSE end', done.compose));
    console.log(row('native:  publish -> SSE end', done.native));
    console.log(row('compose: bare Kafka produce -> consume', kafkaCompose));
    console.log(row('native:  bare Kafka produce -> consume', kafkaNative));
    const ratio = (a: number[], b: number[]) => (percentile(a, 50) / percentile(b, 50)).toFixed(2);
    console.log(`ratio p50 compose/native: first event ${ratio(first.compose, first.native)}x, SSE end ${ratio(done.compose, done.native)}x, Kafka round trip ${ratio(kafkaCompose, kafkaNative)}x`);
  } finally {
    await Promise.all([compose.close(), native.stop()]);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
