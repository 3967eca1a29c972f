import { QueueClosedError, QueueFullError, SerialQueue } from './queue';

/** A task that finishes when the test says so, recording when it started. */
function gate(log: string[], name: string) {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return {
    open: () => open(),
    task: async () => {
      log.push(`start ${name}`);
      await opened;
      log.push(`end ${name}`);
      return name;
    },
  };
}

describe('the serial request queue', () => {
  it('runs one task at a time, in the order they came', async () => {
    const log: string[] = [];
    const queue = new SerialQueue(2);
    const [a, b, c] = ['a', 'b', 'c'].map((n) => gate(log, n));
    const results = [queue.run(a.task), queue.run(b.task), queue.run(c.task)];
    await Promise.resolve();
    expect(log).toEqual(['start a']);
    expect(queue.depth).toEqual({ running: true, waiting: 2 });
    c.open();
    b.open();
    a.open();
    expect(await Promise.all(results)).toEqual(['a', 'b', 'c']);
    expect(log).toEqual(['start a', 'end a', 'start b', 'end b', 'start c', 'end c']);
    expect(queue.depth).toEqual({ running: false, waiting: 0 });
  });

  it('turns a task away at once when the waiting line is full, and takes one again when there is room', async () => {
    const log: string[] = [];
    const queue = new SerialQueue(1);
    const a = gate(log, 'a');
    const b = gate(log, 'b');
    const first = queue.run(a.task);
    const second = queue.run(b.task);
    await expect(queue.run(async () => 'c')).rejects.toEqual(new QueueFullError(1));
    a.open();
    b.open();
    await Promise.all([first, second]);
    await expect(queue.run(async () => 'd')).resolves.toBe('d');
  });

  it('a failing task does not stop the ones behind it', async () => {
    const queue = new SerialQueue(1);
    const failing = queue.run(async () => {
      throw new Error('boom');
    });
    const next = queue.run(async () => 'next');
    await expect(failing).rejects.toThrow('boom');
    await expect(next).resolves.toBe('next');
  });

  it('a waiting task whose signal aborts leaves the line and never starts', async () => {
    const log: string[] = [];
    const queue = new SerialQueue(2);
    const a = gate(log, 'a');
    const first = queue.run(a.task);
    const controller = new AbortController();
    const gone = queue.run(gate(log, 'gone').task, controller.signal);
    controller.abort(new Error('client went away'));
    await expect(gone).rejects.toThrow('client went away');
    expect(queue.depth.waiting).toBe(0);
    a.open();
    await first;
    expect(log).toEqual(['start a', 'end a']);
  });

  it('close refuses new tasks, drops the waiting ones and resolves when the running one is done', async () => {
    const log: string[] = [];
    const queue = new SerialQueue(2);
    const a = gate(log, 'a');
    const running = queue.run(a.task);
    const waiting = queue.run(gate(log, 'b').task);
    const closed = queue.close();
    await expect(waiting).rejects.toBeInstanceOf(QueueClosedError);
    await expect(queue.run(async () => 'late')).rejects.toBeInstanceOf(QueueClosedError);
    let done = false;
    void closed.then(() => (done = true));
    await Promise.resolve();
    expect(done).toBe(false);
    a.open();
    await closed;
    await expect(running).resolves.toBe('a');
    expect(log).toEqual(['start a', 'end a']);
  });
});
