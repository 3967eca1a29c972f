import { HttpException, Logger } from '@nestjs/common';
import { HealthController, Readiness, type ReadinessCheck } from './health';

/** A check whose failure is whatever the test sets; undefined passes. */
function check(name: string): ReadinessCheck & { failure?: Error } {
  const c: ReadinessCheck & { failure?: Error } = {
    name,
    check: async () => {
      if (c.failure) throw c.failure;
    },
  };
  return c;
}

async function answerOf(controller: HealthController): Promise<{ status: number; body: unknown }> {
  try {
    return { status: 200, body: await controller.readyz() };
  } catch (err) {
    if (!(err instanceof HttpException)) throw err;
    return { status: err.getStatus(), body: err.getResponse() };
  }
}

describe('/readyz', () => {
  let warn: jest.SpyInstance;
  let log: jest.SpyInstance;
  beforeEach(() => {
    warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    log = jest.spyOn(Logger.prototype, 'log').mockImplementation(() => undefined);
  });
  afterEach(() => jest.restoreAllMocks());

  it("answers 503 naming the failed check, not its error, which is logged once until it changes or passes again", async () => {
    const postgres = check('postgres');
    const kafka = check('kafka');
    const controller = new HealthController(new Readiness([postgres, kafka]));
    postgres.failure = new Error('connect ECONNREFUSED 10.20.30.40:5432 (user agentrun_prod, database "agentrun")');

    for (let probe = 0; probe < 3; probe++) {
      const answer = await answerOf(controller);
      expect(answer).toEqual({ status: 503, body: { status: 'not_ready', checks: { postgres: 'failed', kafka: 'ok' } } });
      expect(JSON.stringify(answer.body)).not.toMatch(/ECONNREFUSED|10\.20|agentrun_prod/);
    }
    expect(warn.mock.calls.map((c) => c[0])).toEqual(['postgres is not ready: connect ECONNREFUSED 10.20.30.40:5432 (user agentrun_prod, database "agentrun")']);

    postgres.failure = new Error('password authentication failed for user "agentrun_prod"');
    await answerOf(controller);
    expect(warn).toHaveBeenCalledTimes(2);

    postgres.failure = undefined;
    expect(await answerOf(controller)).toEqual({ status: 200, body: { status: 'ready', checks: { postgres: 'ok', kafka: 'ok' } } });
    expect(log.mock.calls.map((c) => c[0])).toEqual(['postgres is ready again']);
  });

  it('says stopping once shutdown has begun, so load balancers stop sending work', async () => {
    const readiness = new Readiness([check('postgres')]);
    readiness.markStopping();
    expect(await answerOf(new HealthController(readiness))).toEqual({ status: 503, body: { status: 'not_ready', checks: { postgres: 'ok', shutdown: 'stopping' } } });
  });
});
