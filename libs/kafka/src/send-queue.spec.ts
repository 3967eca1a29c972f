import { SendQueue, SendQueueClosed, type TopicRecords } from './send-queue';

/** A request function whose requests stay in flight until the test answers them. */
function rig(maxBytes = 1_000) {
  const requests: { records: TopicRecords<string>; answer: (err?: Error) => void }[] = [];
  const queue = new SendQueue<string>(
    (records) =>
      new Promise<void>((resolve, reject) => {
        requests.push({ records, answer: (err) => (err ? reject(err) : resolve()) });
      }),
    (m) => m.length,
    maxBytes,
  );
  return { queue, requests };
}

const settled = async () => {
  for (let i = 0; i < 10; i++) await Promise.resolve();
};

describe('SendQueue', () => {
  it('sends at once when nothing of its topic is in flight', async () => {
    const { queue, requests } = rig();
    const sent = queue.send('t', ['a', 'b']);
    await settled();
    expect(requests).toHaveLength(1);
    expect(requests[0].records).toEqual({ topic: 't', messages: ['a', 'b'] });
    requests[0].answer();
    await expect(sent).resolves.toBeUndefined();
  });

  it('sends made while one is in flight share the next request of their topic, in the order they were made', async () => {
    const { queue, requests } = rig();
    const first = queue.send('t', ['1']);
    await settled();
    const later = [queue.send('t', ['2']), queue.send('t', ['3', '4'])];
    let done = 0;
    for (const p of later) void p.then(() => done++);
    await settled();
    expect(requests).toHaveLength(1);
    requests[0].answer();
    await first;
    await settled();
    expect(requests).toHaveLength(2);
    expect(done).toBe(0);
    expect(requests[1].records).toEqual({ topic: 't', messages: ['2', '3', '4'] });
    requests[1].answer();
    await Promise.all(later);
    expect(done).toBe(2);
  });

  it('each topic is its own lane: a topic in flight holds up no other, and a refused one fails only its sends', async () => {
    const { queue, requests } = rig();
    const slow = queue.send('slow', ['a']);
    const refused = queue.send('gone', ['b']);
    await settled();
    expect(requests.map((r) => r.records.topic)).toEqual(['slow', 'gone']);
    const other = queue.send('t', ['c']);
    await settled();
    expect(requests[2].records).toEqual({ topic: 't', messages: ['c'] });
    requests[2].answer();
    await expect(other).resolves.toBeUndefined();
    requests[1].answer(new Error('TOPIC_AUTHORIZATION_FAILED'));
    await expect(refused).rejects.toThrow('TOPIC_AUTHORIZATION_FAILED');
    requests[0].answer();
    await expect(slow).resolves.toBeUndefined();
  });

  it('a request holds sends up to its byte limit, never out of order; one larger send goes alone', async () => {
    const { queue, requests } = rig(10);
    const all = [queue.send('t', ['aaaa']), queue.send('t', ['bbbbbb']), queue.send('t', ['cccccc']), queue.send('t', ['dddddddddddddddd']), queue.send('t', ['e'])];
    const batches: string[][] = [];
    for (let i = 0; i < 4; i++) {
      await settled();
      batches.push(requests[i].records.messages);
      requests[i].answer();
    }
    await Promise.all(all);
    // 'aaaa' and 'bbbbbb' fit in 10; 'e' never overtakes the send that did not fit before it.
    expect(batches).toEqual([['aaaa', 'bbbbbb'], ['cccccc'], ['dddddddddddddddd'], ['e']]);
  });

  it('a failed request fails every send in it, and the lane goes on', async () => {
    const { queue, requests } = rig();
    const first = queue.send('t', ['1']);
    await settled();
    const a = queue.send('t', ['2']);
    const b = queue.send('t', ['3']);
    requests[0].answer();
    await first;
    await settled();
    requests[1].answer(new Error('broker away'));
    await expect(a).rejects.toThrow('broker away');
    await expect(b).rejects.toThrow('broker away');
    const c = queue.send('t', ['4']);
    await settled();
    expect(requests).toHaveLength(3);
    requests[2].answer();
    await expect(c).resolves.toBeUndefined();
  });

  it('a request function that throws at once fails its sends and does not wedge the lane', async () => {
    let calls = 0;
    const queue = new SendQueue<string>(
      (() => {
        calls++;
        if (calls === 1) throw new Error('thrown at once');
        return Promise.resolve();
      }) as (records: TopicRecords<string>) => Promise<void>,
      (m) => m.length,
      1_000,
    );
    await expect(queue.send('t', ['1'])).rejects.toThrow('thrown at once');
    await expect(queue.send('t', ['2'])).resolves.toBeUndefined();
  });

  it('a send made as soon as the last one is answered is sent (publishers awaiting each send)', async () => {
    const queue = new SendQueue<string>(async () => undefined, (m) => m.length, 1_000);
    for (let i = 0; i < 5; i++) await queue.send('t', [String(i)]);
    let n = 0;
    await Promise.all(
      [0, 1, 2].map(async () => {
        for (let i = 0; i < 20; i++) {
          await queue.send('t', ['x']);
          n++;
        }
      }),
    );
    expect(n).toBe(60);
  });

  it('close() refuses new sends and waits for every send made before it', async () => {
    const { queue, requests } = rig();
    const a = queue.send('t', ['1']);
    const b = queue.send('u', ['2']);
    let closed = false;
    const closing = queue.close().then(() => (closed = true));
    await expect(queue.send('t', ['3'])).rejects.toBeInstanceOf(SendQueueClosed);
    await settled();
    requests[0].answer();
    await a;
    await settled();
    expect(closed).toBe(false);
    requests[1].answer();
    await Promise.all([b, closing]);
    expect(closed).toBe(true);
    expect(requests).toHaveLength(2);
  });

  it('sends nothing for an empty send', async () => {
    const { queue, requests } = rig();
    await queue.send('t', []);
    expect(requests).toHaveLength(0);
  });
});
