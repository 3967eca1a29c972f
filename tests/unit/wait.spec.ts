import { createServer } from 'node:net';
import { KafkaJSConnectionError, KafkaJSProtocolError } from 'kafkajs';
import { Client as PgClient, DatabaseError } from 'pg';
import { isTestBug, Settled, waitFor } from '../support/wait';

/** A probe that answers from `values` in turn (the last one from then on), counting its calls. */
function answering<T>(...values: T[]): { probe: () => T; calls: () => number } {
  let calls = 0;
  return { probe: () => values[Math.min(calls++, values.length - 1)], calls: () => calls };
}

/** A probe that throws `errors` in turn, then answers `value`. */
function throwing<T>(errors: unknown[], value: T): { probe: () => Promise<T>; calls: () => number } {
  let calls = 0;
  return {
    probe: async () => {
      const err = errors[calls++];
      if (err !== undefined) throw err;
      return value;
    },
    calls: () => calls,
  };
}

/** A port nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function errorOf(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a rejection');
}

describe('waitFor: values', () => {
  it('resolves with the first value that counts as done', async () => {
    const { probe, calls } = answering<unknown>(undefined, { row: 1 });
    await expect(waitFor('a row', probe, 5_000, 1)).resolves.toEqual({ row: 1 });
    expect(calls()).toBe(2);
  });

  it('takes undefined, null, false, 0, the empty string and NaN for "not yet"', async () => {
    const { probe, calls } = answering<unknown>(undefined, null, false, 0, '', Number.NaN, 'there');
    await expect(waitFor('the answer', probe, 5_000, 1)).resolves.toBe('there');
    expect(calls()).toBe(7);
  });

  it('takes a positive count, true, a non-empty string and an empty array or object for done', async () => {
    for (const value of [3, -1, true, 'x', [], {}]) await expect(waitFor('a value', () => value, 1_000, 1)).resolves.toBe(value);
  });

  it('a count that stays 0 times out, and the message says what the probe last returned', async () => {
    const { probe, calls } = answering(0);
    const err = await errorOf(waitFor('a count above zero', probe, 200, 10));
    expect(err.message).toMatch(/^timed out after 200 ms waiting for a count above zero \(\d+ polls; the probe last returned 0\)$/);
    expect(calls()).toBeGreaterThan(2);
  });

  it('a null that stays null times out too', async () => {
    await expect(waitFor('a row', () => null, 100, 10)).rejects.toThrow(/timed out after 100 ms waiting for a row \(\d+ polls; the probe last returned null\)/);
  });
});

describe('waitFor: errors that are bugs in the test fail at once', () => {
  it('a failed expect inside the probe', async () => {
    const { probe, calls } = throwing([], 'x');
    const failing = async () => {
      expect(await probe()).toBe('y');
      return true;
    };
    const started = Date.now();
    const err = await errorOf(waitFor('an expectation', failing, 10_000, 10));
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(err).toHaveProperty('matcherResult');
    expect(err.message).toMatch(/Expected: "y"/);
    expect(calls()).toBe(1);
  });

  it('a ReferenceError', async () => {
    const { probe, calls } = throwing([new ReferenceError('runID is not defined')], true);
    await expect(waitFor('a misspelt name', probe, 10_000, 10)).rejects.toThrow(ReferenceError);
    expect(calls()).toBe(1);
  });

  it('a TypeError from reading a property of nothing', async () => {
    let calls = 0;
    const probe = () => {
      calls += 1;
      const body: { items?: { is_final: boolean }[] } = {};
      return body.items!.some((r) => r.is_final);
    };
    await expect(waitFor('a property of nothing', probe, 10_000, 10)).rejects.toThrow(/Cannot read properties of undefined/);
    expect(calls).toBe(1);
  });

  it('node:assert', async () => {
    const { strict: assert } = await import('node:assert');
    await expect(waitFor('an assert', () => assert.equal(1, 2), 10_000, 10)).rejects.toMatchObject({ code: 'ERR_ASSERTION' });
  });

  it('a Settled error: the probe saw the condition can no longer hold', async () => {
    let calls = 0;
    const probe = () => {
      calls += 1;
      if (calls < 3) return false;
      throw new Settled('run acme/r1 ended failed while the test waited for done');
    };
    await expect(waitFor('a run to be done', probe, 10_000, 10)).rejects.toThrow('run acme/r1 ended failed while the test waited for done');
    expect(calls).toBe(3);
  });

  it('tells the kinds apart by name, not by realm', () => {
    expect(isTestBug(Object.assign(new Error('x'), { name: 'TypeError' }))).toBe(true);
    expect(isTestBug(Object.assign(new Error('fetch failed'), { name: 'TypeError' }))).toBe(false);
    expect(isTestBug(new TypeError('terminated'))).toBe(false);
    expect(isTestBug(new Error('boom'))).toBe(false);
    expect(isTestBug('a string')).toBe(false);
    expect(isTestBug(undefined)).toBe(false);
  });
});

describe('waitFor: transient errors are retried, and the last one is named on a timeout', () => {
  it("undici's fetch failed (a refused connection), then an answer", async () => {
    const url = `http://127.0.0.1:${await closedPort()}/readyz`;
    const refused = await errorOf(fetch(url));
    expect(refused).toMatchObject({ name: 'TypeError', message: 'fetch failed' });
    const { probe, calls } = throwing([refused, refused], 'ready');
    await expect(waitFor('the service', probe, 5_000, 1)).resolves.toBe('ready');
    expect(calls()).toBe(3);
  });

  it('a refused connection that never ends times out naming it', async () => {
    const url = `http://127.0.0.1:${await closedPort()}/readyz`;
    const err = await errorOf(waitFor('the service to be ready', async () => (await fetch(url)).status === 200, 300, 20));
    expect(err.message).toMatch(/^timed out after 300 ms waiting for the service to be ready \(\d+ polls; the last error was TypeError: fetch failed \(cause: ECONNREFUSED\)\)$/);
  });

  it('pg errors: a refused connection and a server error', async () => {
    const client = new PgClient({ host: '127.0.0.1', port: await closedPort(), connectionTimeoutMillis: 2_000 });
    const refused = await errorOf(client.connect());
    expect(refused).toMatchObject({ code: 'ECONNREFUSED' });
    const missing = new DatabaseError('relation "runs" does not exist', 0, 'error');
    const { probe, calls } = throwing([refused, missing], [{ n: 1 }]);
    await expect(waitFor('a row', probe, 5_000, 1)).resolves.toEqual([{ n: 1 }]);
    expect(calls()).toBe(3);
    const err = await errorOf(waitFor('the table', () => Promise.reject(missing), 100, 10));
    expect(err.message).toMatch(/the last error was error: relation "runs" does not exist\)$/);
  });

  it('kafkajs errors', async () => {
    const connection = new KafkaJSConnectionError('Connection error: connect ECONNREFUSED 127.0.0.1:9092', { broker: '127.0.0.1:9092', code: 'ECONNREFUSED' });
    const leader = new KafkaJSProtocolError('There is no leader for this topic-partition as we are in the middle of a leadership election');
    const { probe, calls } = throwing([connection, leader], true);
    await expect(waitFor('the topics', probe, 5_000, 1)).resolves.toBe(true);
    expect(calls()).toBe(3);
    const err = await errorOf(waitFor('the broker', () => Promise.reject(connection), 100, 10));
    expect(err.message).toMatch(/the last error was KafkaJSConnectionError \[ECONNREFUSED\]: Connection error: connect ECONNREFUSED 127\.0\.0\.1:9092\)$/);
  });

  it('names the last error, not the first, when the errors change', async () => {
    let calls = 0;
    const probe = async () => {
      calls += 1;
      throw new Error(calls === 1 ? 'first' : 'later');
    };
    await expect(waitFor('a flaky thing', probe, 100, 10)).rejects.toThrow(/the last error was Error: later\)$/);
  });
});
