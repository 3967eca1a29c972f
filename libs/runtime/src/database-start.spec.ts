import type { DataSource } from 'typeorm';
import { initializeWhenReachable, isUnreachable } from './infrastructure';

function fakeSource(failures: unknown[]): { source: DataSource; calls: () => number } {
  let calls = 0;
  const source = {
    initialize: async () => {
      const failure = failures[calls++];
      if (failure) throw failure;
    },
  } as unknown as DataSource;
  return { source, calls: () => calls };
}

const quiet = { warn: () => undefined };

describe('initializeWhenReachable', () => {
  it('tries again while Postgres is out of reach, then connects', async () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    const { source, calls } = fakeSource([refused, new Error('Connection terminated due to connection timeout')]);
    await initializeWhenReachable(source, quiet, 10_000);
    expect(calls()).toBe(3);
  });

  it('fails at once on an error that waiting cannot mend', async () => {
    const auth = Object.assign(new Error('password authentication failed for user "agentrun"'), { code: '28P01' });
    const { source, calls } = fakeSource([auth]);
    await expect(initializeWhenReachable(source, quiet, 10_000)).rejects.toThrow('password authentication failed');
    expect(calls()).toBe(1);
  });

  it('gives up with the last error once the time is up', async () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    const { source, calls } = fakeSource(Array.from({ length: 100 }, () => refused));
    await expect(initializeWhenReachable(source, quiet, 0)).rejects.toThrow('ECONNREFUSED');
    expect(calls()).toBe(1);
  });

  it('tells a server still starting from a refusal of the credentials', () => {
    expect(isUnreachable(Object.assign(new Error('the database system is starting up'), { code: '57P03' }))).toBe(true);
    expect(isUnreachable(Object.assign(new Error('database "x" does not exist'), { code: '3D000' }))).toBe(false);
  });
});
