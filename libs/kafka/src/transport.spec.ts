import type { BatchContext, ConsumeOptions, InboundMessage, KafkaBus } from './bus';
import { KafkaBusTransport, type KafkaBusContext } from './transport';

/** A bus that records what the transport asks of it and lets the test hand it batches. */
function fakeBus() {
  const consumed: ConsumeOptions[] = [];
  let stopped = 0;
  const bus = {
    consume: async (options: ConsumeOptions) => {
      consumed.push(options);
      return { isRunning: () => stopped === 0, stop: async () => void (stopped += 1) };
    },
  } as unknown as KafkaBus;
  return { bus, consumed, stops: () => stopped };
}

/** A fetched batch's controls: commits are recorded, `active` can be switched off mid-batch. */
function fakeBatch() {
  const commits: string[] = [];
  const state = { active: true, heartbeats: 0 };
  const ctx: BatchContext = {
    commit: async (offset) => void commits.push(offset),
    heartbeat: async () => void (state.heartbeats += 1),
    isActive: () => state.active,
  };
  return { ctx, commits, state };
}

const message = (topic: string, offset: number): InboundMessage => ({
  topic,
  partition: 2,
  offset: String(offset),
  key: Buffer.from('k'),
  value: Buffer.from(`m${offset}`),
  timestamp: '0',
});

async function listening(transport: KafkaBusTransport): Promise<void> {
  await new Promise<void>((resolve, reject) => void transport.listen((err) => (err ? reject(err) : resolve())));
}

describe('KafkaBusTransport', () => {
  it('subscribes one group, exactly as named, to the topic of each event pattern', async () => {
    const { bus, consumed } = fakeBus();
    const transport = new KafkaBusTransport({ name: 'c', bus, groupId: 'p.group', topic: (name) => `p.${name}`, concurrency: 3 });
    transport.addHandler('a.v1', async () => undefined, true);
    transport.addHandler('b.v1', async () => undefined, true);
    await listening(transport);
    expect(consumed).toHaveLength(1);
    expect(consumed[0]).toMatchObject({ groupId: 'p.group', topics: ['p.a.v1', 'p.b.v1'], concurrency: 3 });
  });

  it('refuses a request-response handler: nothing on Kafka answers it', async () => {
    const transport = new KafkaBusTransport({ name: 'c', bus: fakeBus().bus, groupId: 'g' });
    transport.addHandler('a.v1', async () => 'reply', false);
    await expect(listening(transport)).rejects.toThrow(/only @EventPattern/);
  });

  it('hands a per-message handler one message at a time, with raw bytes, and goes on only past what it committed', async () => {
    const { bus, consumed } = fakeBus();
    const transport = new KafkaBusTransport({ name: 'c', bus, groupId: 'g' });
    const seen: string[] = [];
    transport.addHandler(
      't',
      async (m: InboundMessage, ctx: KafkaBusContext) => {
        seen.push(`${m.value?.toString()}@${ctx.getTopic()}/${ctx.getPartition()}:${ctx.getFirstOffset()}-${ctx.getLastOffset()}`);
        if (m.offset !== '12') await ctx.commit();
      },
      true,
    );
    await listening(transport);
    const batch = fakeBatch();
    await consumed[0].handle([message('t', 10), message('t', 11), message('t', 12), message('t', 13)], batch.ctx);
    // 12 was not committed (its handler gave up), so 13 waits for the partition's next owner.
    expect(seen).toEqual(['m10@t/2:10-10', 'm11@t/2:11-11', 'm12@t/2:12-12']);
    expect(batch.commits).toEqual(['10', '11']);
  });

  it('stops between messages once the partition is no longer its own', async () => {
    const { bus, consumed } = fakeBus();
    const transport = new KafkaBusTransport({ name: 'c', bus, groupId: 'g' });
    const batch = fakeBatch();
    const seen: string[] = [];
    transport.addHandler(
      't',
      async (m: InboundMessage, ctx: KafkaBusContext) => {
        seen.push(m.offset);
        await ctx.commit();
        batch.state.active = false;
      },
      true,
    );
    await listening(transport);
    await consumed[0].handle([message('t', 1), message('t', 2)], batch.ctx);
    expect(seen).toEqual(['1']);
  });

  it('hands a batch handler the whole fetched batch in one call; its commit defaults to the last offset', async () => {
    const { bus, consumed } = fakeBus();
    const transport = new KafkaBusTransport({ name: 'c', bus, groupId: 'g' });
    const calls: string[][] = [];
    transport.addHandler(
      't',
      async (messages: InboundMessage[], ctx: KafkaBusContext) => {
        calls.push(messages.map((m) => m.offset));
        expect([ctx.getFirstOffset(), ctx.getLastOffset(), ctx.isActive()]).toEqual(['5', '7', true]);
        await ctx.heartbeat();
        await ctx.commit();
      },
      true,
      { batch: true },
    );
    await listening(transport);
    const batch = fakeBatch();
    await consumed[0].handle([message('t', 5), message('t', 6), message('t', 7)], batch.ctx);
    await consumed[0].handle([], batch.ctx);
    expect(calls).toEqual([['5', '6', '7']]);
    expect(batch.commits).toEqual(['7']);
    expect(batch.state.heartbeats).toBe(1);
  });

  it('throws a handler failure back to the consumer, which fetches the batch again', async () => {
    const { bus, consumed } = fakeBus();
    const transport = new KafkaBusTransport({ name: 'c', bus, groupId: 'g' });
    transport.addHandler('t', async () => Promise.reject(new Error('postgres is away')), true, { batch: true });
    await listening(transport);
    const batch = fakeBatch();
    await expect(consumed[0].handle([message('t', 1)], batch.ctx)).rejects.toThrow('postgres is away');
    expect(batch.commits).toEqual([]);
  });

  it('is ready once in its group, and close leaves the group', async () => {
    const { bus, stops } = fakeBus();
    const transport = new KafkaBusTransport({ name: 'projector-consumer', bus, groupId: 'g' });
    transport.addHandler('t', async () => undefined, true);
    await expect(transport.check()).rejects.toThrow(/not in the consumer group/);
    await listening(transport);
    await expect(transport.check()).resolves.toBeUndefined();
    await transport.close();
    expect(stops()).toBe(1);
    await expect(transport.check()).rejects.toThrow(/not in the consumer group/);
  });
});
