/**
 * Ordered, fully acknowledged sends under concurrency: `KafkaBus.send`, which coalesces the sends made
 * while one is in flight into the next request (libs/kafka/src/send-queue.ts), beside the baseline in
 * the same run: the same idempotent kafkajs producer (acks=all, one request in flight) sent to once
 * per call, as `KafkaBus.send` did before. C publishers (as many runs publishing at once) each make
 * sends of 2 run-event-sized records keyed by their own run, one after the other, awaiting each; sides
 * alternate (baseline, ours, baseline, ours) on a topic of the bench's own. Each side's records are
 * counted on the topic afterwards (end offsets), or the bench exits non-zero.
 *
 *   npm run bench:kafka-send                          # C = 1, 10, 50
 *   node dist/tests/bench/kafka-send.bench.js 1,10,50 [seconds per side=5]
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { CompressionTypes, Kafka, logLevel, Partitioners } from 'kafkajs';
import { KafkaBus, type OutboundMessage } from '@agentrun/kafka';
import { stackUrls } from '../support/stack-env';
import { percentile } from './load-probes';

const RECORD = JSON.stringify({ run_id: 'r', org: 'bench', kind: 'agent', seq: 1, type: 'step_completed', ts: new Date().toISOString(), payload: { state: { status: 'running', goal: 'x'.repeat(300), step: 1 } } });

interface Side {
  name: string;
  send(topic: string, messages: OutboundMessage[]): Promise<void>;
}

interface Figures {
  sends: number;
  perSecond: number;
  p50: number;
  p99: number;
}

/** C publishers sending for `seconds`, each awaiting its send before the next. */
async function drive(side: Side, topic: string, publishers: number, seconds: number): Promise<Figures> {
  const latencies: number[] = [];
  const end = performance.now() + seconds * 1000;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: publishers }, async (_, p) => {
      const key = `run-${p}-${randomUUID()}`;
      while (performance.now() < end) {
        const t = performance.now();
        await side.send(topic, [
          { key, value: RECORD, headers: { seq: '1' } },
          { key, value: RECORD, headers: { seq: '2' } },
        ]);
        latencies.push(performance.now() - t);
      }
    }),
  );
  const elapsed = (performance.now() - t0) / 1000;
  return { sends: latencies.length, perSecond: latencies.length / elapsed, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
}

async function main(): Promise<void> {
  const counts = (process.argv[2] ?? '1,10,50').split(',').map(Number);
  const seconds = Number(process.argv[3] ?? 5);
  if (counts.some((n) => !Number.isInteger(n) || n < 1 || n > 1_000) || !(seconds > 0)) throw new Error('usage: kafka-send.bench.js [publishers, e.g. 1,10,50] [seconds per side]');
  const brokers = stackUrls().kafkaBrokers;
  const topic = `bench-kafka-send-${randomUUID().slice(0, 8)}`;
  const bus = new KafkaBus({ brokers, clientId: 'bench-kafka-send', timings: { sessionTimeout: 10_000, heartbeatInterval: 1_000, rebalanceTimeout: 10_000 } });
  // The baseline: KafkaBus.send before coalescing, one producer.send per call on the same kind of producer.
  const kafka = new Kafka({ clientId: 'bench-kafka-send-baseline', brokers, logLevel: logLevel.WARN });
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false, createPartitioner: Partitioners.DefaultPartitioner });
  const admin = kafka.admin();
  await Promise.all([producer.connect(), admin.connect()]);
  try {
    await bus.createTopics([{ name: topic, partitions: 3, replicationFactor: 1, configs: {} }]);
    const sides: Side[] = [
      { name: 'baseline: a request per send', send: (t, messages) => producer.send({ topic: t, acks: -1, compression: CompressionTypes.None, messages }).then(() => undefined) },
      { name: 'KafkaBus.send (coalesced)', send: (t, messages) => bus.send(t, messages) },
    ];
    // Warm both producers (connection, metadata, producer id).
    for (const side of sides) await drive(side, topic, 1, 0.5);
    const endOffsets = async () => (await admin.fetchTopicOffsets(topic)).reduce((n, p) => n + Number(p.high), 0);
    console.log(`\nKafka sends of 2 records (${RECORD.length} bytes each), C publishers each awaiting its send, ${seconds} s a side; sides alternate`);
    console.log(`${'publishers'.padEnd(11)}${'side'.padEnd(32)}${'sends/s'.padStart(9)}${'p50 ms'.padStart(9)}${'p99 ms'.padStart(9)}`);
    for (const c of counts) {
      const by = new Map<string, Figures[]>();
      for (const round of [0, 1]) {
        for (const side of sides) {
          const before = await endOffsets();
          const f = await drive(side, topic, c, seconds);
          const written = (await endOffsets()) - before;
          if (written !== f.sends * 2) throw new Error(`${side.name}: ${f.sends * 2} records acknowledged, ${written} on the topic`);
          by.set(side.name, [...(by.get(side.name) ?? []), f]);
          console.log(`${String(c).padEnd(11)}${side.name.padEnd(32)}${f.perSecond.toFixed(0).padStart(9)}${f.p50.toFixed(2).padStart(9)}${f.p99.toFixed(2).padStart(9)}   (round ${round + 1}, ${f.sends} sends)`);
        }
      }
      const mean = (name: string, k: keyof Figures) => by.get(name)!.reduce((s, f) => s + f[k], 0) / 2;
      const [base, ours] = sides.map((s) => s.name);
      console.log(`${String(c).padEnd(11)}ours / baseline: sends/s ${(mean(ours, 'perSecond') / mean(base, 'perSecond')).toFixed(2)}x, p50 ${(mean(ours, 'p50') / mean(base, 'p50')).toFixed(2)}x`);
    }
  } finally {
    await bus.deleteTopics([topic]).catch(() => undefined);
    await Promise.all([producer.disconnect(), admin.disconnect(), bus.close()]);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
