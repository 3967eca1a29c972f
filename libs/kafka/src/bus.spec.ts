import { EventEmitter } from 'node:events';
import { consumerRestartDelay, KafkaBus } from './bus';

/** kafkajs's consumer as far as the bus drives it: it joins when run, and the test makes it crash. */
class FakeConsumer extends EventEmitter {
  readonly events = { GROUP_JOIN: 'join', STOP: 'stop', CRASH: 'crash' };
  disconnected = false;
  ran = false;
  /** What kafkajs's run was given: a test calls its eachBatch as kafkajs would. */
  config?: { eachBatch: (payload: Record<string, unknown>) => Promise<void> };
  async connect(): Promise<void> {
    await gate;
  }
  async subscribe(): Promise<void> {}
  async run(config: { eachBatch: (payload: Record<string, unknown>) => Promise<void> }): Promise<void> {
    this.ran = true;
    this.config = config;
    setImmediate(() => this.emit('join', {}));
  }
  async disconnect(): Promise<void> {
    this.disconnected = true;
    this.emit('stop', {});
  }
  crash(restart: boolean): void {
    this.emit('crash', { payload: { error: Object.assign(new Error('Snappy compression not implemented'), { name: 'KafkaJSNotImplemented' }), restart } });
  }
}

const consumers: FakeConsumer[] = [];
/** What a consumer's connect waits for (a test holds it to stop a consumer mid-start). */
let gate: Promise<void> = Promise.resolve();
jest.mock('kafkajs', () => {
  const actual = jest.requireActual('kafkajs');
  return {
    ...actual,
    Kafka: jest.fn().mockImplementation(() => ({
      consumer: () => {
        const consumer = new FakeConsumer();
        consumers.push(consumer);
        return consumer;
      },
    })),
  };
});

const joined = () => new Promise((resolve) => setImmediate(resolve));

describe('KafkaBus consumers', () => {
  const logs: string[] = [];
  const bus = () => new KafkaBus({ brokers: ['127.0.0.1:1'], clientId: 'spec', timings: { sessionTimeout: 10_000, heartbeatInterval: 1_000, rebalanceTimeout: 10_000 }, log: (_level, message) => logs.push(message) });

  beforeEach(() => {
    consumers.length = 0;
    gate = Promise.resolve();
    logs.length = 0;
    jest.useFakeTimers({ doNotFake: ['setImmediate'] });
  });
  afterEach(() => jest.useRealTimers());

  it('starts a new consumer, with backoff, after kafkajs gives one up for good', async () => {
    const handle = await bus().consume({ groupId: 'g', topics: ['t'], handle: async () => undefined });
    await joined();
    expect(handle.isRunning()).toBe(true);
    consumers[0].crash(false);
    expect(handle.isRunning()).toBe(false);
    expect(logs.join('\n')).toMatch(/kafka consumer g stopped \(KafkaJSNotImplemented: Snappy compression not implemented\); starting it again in 1000 ms/);
    await jest.advanceTimersByTimeAsync(999);
    expect(consumers).toHaveLength(1);
    await jest.advanceTimersByTimeAsync(1);
    expect(consumers).toHaveLength(2);
    await joined();
    expect(handle.isRunning()).toBe(true);
    // A second crash before any batch was handled waits longer.
    consumers[1].crash(false);
    expect(logs[logs.length - 1]).toMatch(/starting it again in 2000 ms/);
    await jest.advanceTimersByTimeAsync(2_000);
    expect(consumers).toHaveLength(3);
    await handle.stop();
    expect(consumers[2].disconnected).toBe(true);
  });

  it('keeps the member in its group while a handler works: a heartbeat every interval, none after it returns', async () => {
    let finish!: () => void;
    const handle = await bus().consume({ groupId: 'g', topics: ['t'], handle: () => new Promise<void>((resolve) => (finish = resolve)) });
    await joined();
    const heartbeats: number[] = [];
    const batch = { topic: 't', partition: 0, messages: [{ offset: '7', key: null, value: Buffer.from('{}'), timestamp: '0', headers: {} }] };
    const handled = consumers[0].config!.eachBatch({
      batch,
      resolveOffset: () => undefined,
      commitOffsetsIfNecessary: async () => undefined,
      heartbeat: async () => {
        heartbeats.push(Date.now());
      },
      isRunning: () => true,
      isStale: () => false,
    });
    // A decision that takes 10 s, longer than a session: ten heartbeats meanwhile, one a second.
    await jest.advanceTimersByTimeAsync(10_000);
    expect(heartbeats).toHaveLength(10);
    finish();
    await handled;
    await jest.advanceTimersByTimeAsync(5_000);
    expect(heartbeats).toHaveLength(10);
    await handle.stop();
  });

  it('leaves a retriable crash to kafkajs, which restarts the same consumer', async () => {
    const handle = await bus().consume({ groupId: 'g', topics: ['t'], handle: async () => undefined });
    await joined();
    consumers[0].crash(true);
    expect(handle.isRunning()).toBe(false);
    await jest.advanceTimersByTimeAsync(60_000);
    expect(consumers).toHaveLength(1);
    await handle.stop();
  });

  it('starts nothing once stopped, even with a restart pending', async () => {
    const handle = await bus().consume({ groupId: 'g', topics: ['t'], handle: async () => undefined });
    await joined();
    consumers[0].crash(false);
    await handle.stop();
    await jest.advanceTimersByTimeAsync(60_000);
    expect(consumers).toHaveLength(1);
    expect(handle.isRunning()).toBe(false);
  });

  it('starts from 1 s again after a minute without a crash', async () => {
    const handle = await bus().consume({ groupId: 'g', topics: ['t'], handle: async () => undefined });
    await joined();
    consumers[0].crash(false);
    await jest.advanceTimersByTimeAsync(1_000);
    await joined();
    await jest.advanceTimersByTimeAsync(61_000);
    consumers[1].crash(false);
    expect(logs[logs.length - 1]).toMatch(/starting it again in 1000 ms/);
    await handle.stop();
  });

  it('a stop while a restart is connecting leaves nothing consuming', async () => {
    const handle = await bus().consume({ groupId: 'g', topics: ['t'], handle: async () => undefined });
    await joined();
    let open!: () => void;
    gate = new Promise((resolve) => (open = resolve));
    consumers[0].crash(false);
    await jest.advanceTimersByTimeAsync(1_000);
    expect(consumers).toHaveLength(2);
    const stopped = handle.stop();
    open();
    await stopped;
    await joined();
    expect(consumers[1].ran).toBe(false);
    expect(consumers[1].disconnected).toBe(true);
    expect(handle.isRunning()).toBe(false);
  });

  it('backs off from 1 s, doubling, to 30 s', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 50].map(consumerRestartDelay)).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000]);
  });
});
