import { SendQueue, type TopicRecords } from './send-queue';

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
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

describe('SendQueue', () => {
  it('sends at once when nothing is in flight', async () => {
    const { queue, requests } = rig();
    const sent = queue.send('t', ['a', 'b']);
    expect(requests).toHaveLength(1);
    expect(requests[0].records).toEqual({ topic: 't', messages: ['a', 'b'] });
    requests[0].answer();
    await expect(sent).resolves.toBeUndefined();
  });

  it('sends made while one is in flight share the next request, one topic to a request, in the order they were made', async () => {
    const { queue, requests } = rig();
    const first = queue.send('t', ['1']);
    const later = [queue.send('t', ['2']), queue.send('u', ['x']), queue.send('t', ['3', '4']), queue.send('u', ['y'])];
    let done = 0;
    for (const p of later) void p.then(() => done++);
    expect(requests).toHaveLength(1);
    requests[0].answer();
    await first;
    await settled();
    expect(requests).toHaveLength(2);
    expect(done).toBe(0);
    expect(requests[1].records).toEqual({ topic: 't', messages: ['2', '3', '4'] });
    requests[1].answer();
    await Promise.all([later[0], later[2]]);
    await settled();
    expect(done).toBe(2);
    expect(requests[2].records).toEqual({ topic: 'u', messages: ['x', 'y'] });
    requests[2].answer();
    await Promise.all(later);
    expect(done).toBe(4);
  });

  it('a topic the broker refuses fails only its own sends', async () => {
    const { queue, requests } = rig();
    const first = queue.send('t', ['1']);
    const refused = queue.send('gone', ['a']);
    const fine = queue.send('t', ['2']);
    requests[0].answer();
    await first;
    await settled();
    expect(requests[1].records).toEqual({ topic: 'gone', messages: ['a'] });
    requests[1].answer(new Error('TOPIC_AUTHORIZATION_FAILED'));
    await settled();
    expect(requests[2].records).toEqual({ topic: 't', messages: ['2'] });
    requests[2].answer();
    await expect(fine).resolves.toBeUndefined();
    await expect(refused).rejects.toThrow('TOPIC_AUTHORIZATION_FAILED');
  });

  it('a request holds sends up to its byte limit; one larger send goes alone', async () => {
    const { queue, requests } = rig(10);
    const all = [queue.send('t', ['aaaa']), queue.send('t', ['bbbbbb']), queue.send('t', ['cccccc']), queue.send('t', ['dddddddddddddddd']), queue.send('t', ['e'])];
    requests[0].answer();
    await settled();
    // 'bbbbbb' (6) and 'cccccc' (6) do not fit together under 10.
    expect(requests[1].records.messages).toEqual(['bbbbbb']);
    requests[1].answer();
    await settled();
    expect(requests[2].records.messages).toEqual(['cccccc']);
    requests[2].answer();
    await settled();
    expect(requests[3].records.messages).toEqual(['dddddddddddddddd']);
    requests[3].answer();
    await settled();
    expect(requests[4].records.messages).toEqual(['e']);
    requests[4].answer();
    await Promise.all(all);
  });

  it('a failed request fails every send in it, and the queue goes on', async () => {
    const { queue, requests } = rig();
    const first = queue.send('t', ['1']);
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

  it('idle() waits for every send made before it', async () => {
    const { queue, requests } = rig();
    await queue.idle();
    void queue.send('t', ['1']);
    void queue.send('t', ['2']);
    let idle = false;
    const waiting = queue.idle().then(() => (idle = true));
    requests[0].answer();
    await settled();
    expect(idle).toBe(false);
    requests[1].answer();
    await waiting;
    expect(idle).toBe(true);
  });

  it('a send made as soon as the last one is answered is sent (a publisher awaiting each send)', async () => {
    const queue = new SendQueue<string>(async () => undefined, (m) => m.length, 1_000);
    for (let i = 0; i < 5; i++) await queue.send('t', [String(i)]);
    let n = 0;
    await Promise.all([0, 1, 2].map(async () => {
      for (let i = 0; i < 20; i++) {
        await queue.send('t', ['x']);
        n++;
      }
    }));
    expect(n).toBe(60);
  });

  it('sends nothing for an empty send', async () => {
    const { queue, requests } = rig();
    await queue.send('t', []);
    expect(requests).toHaveLength(0);
  });
});
