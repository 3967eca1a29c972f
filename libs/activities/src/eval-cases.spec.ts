import { ScorerOptionError, UnreadableJudgeError, UnreadableOutputError } from '@agentrun/evals';
import { CaseError, caseErrorOf } from './eval-cases';
import { ChatError } from './llm';

describe('how a real eval case failed', () => {
  const http = (status: number, message = 'nope', extra: { code?: string; retryAfterMs?: number } = {}) =>
    Object.assign(new ChatError(status === 429 ? 'rate_limited' : status >= 500 ? 'server_error' : 'bad_request', message, { status, ...(extra.retryAfterMs ? { retryAfterMs: extra.retryAfterMs } : {}) }), extra.code ? { code: extra.code } : {});

  it('is infra_error, worth another attempt, for 5xx, timeouts, networks and plain rate limits (keeping Retry-After)', () => {
    for (const err of [http(500), http(503), new ChatError('timeout', 't'), new ChatError('network', 'n'), new ChatError('bad_response', 'b')]) {
      expect(caseErrorOf(err)).toMatchObject({ errorType: 'infra_error', transient: true });
    }
    expect(caseErrorOf(http(429, 'slow down', { retryAfterMs: 1500 }))).toMatchObject({ errorType: 'infra_error', transient: true, retryAfterMs: 1500 });
  });

  it("is the key's fault, never retried, for 401/403 and a spent budget", () => {
    expect(caseErrorOf(http(401))).toMatchObject({ errorType: 'model_key_auth', transient: false });
    expect(caseErrorOf(http(403))).toMatchObject({ errorType: 'model_key_auth', transient: false });
    expect(caseErrorOf(http(402))).toMatchObject({ errorType: 'model_key_budget', transient: false });
    expect(caseErrorOf(http(429, 'You exceeded your current quota', { code: 'insufficient_quota' }))).toMatchObject({ errorType: 'model_key_budget', transient: false });
  });

  it("is agent_error for a request the model refuses, an empty output and a scorer that cannot apply; the judge's missing grade is infra", () => {
    expect(caseErrorOf(http(400, 'unknown model'))).toMatchObject({ errorType: 'agent_error', message: expect.stringMatching(/refused the request/) });
    expect(caseErrorOf(new UnreadableOutputError('empty'))).toMatchObject({ errorType: 'agent_error' });
    expect(caseErrorOf(new ScorerOptionError('numeric: the target is not a number'))).toMatchObject({ errorType: 'agent_error' });
    expect(caseErrorOf(new UnreadableJudgeError('I think it is fine'))).toMatchObject({ errorType: 'infra_error', transient: false });
  });

  it('is not classified when it is not a case failure at all (a bug fails the activity instead)', () => {
    expect(caseErrorOf(new TypeError('x is undefined'))).toBeUndefined();
    const own = new CaseError('agent_error', 'mine');
    expect(caseErrorOf(own)).toBe(own);
  });
});
