import type { ExecutionContext } from '@nestjs/common';
import type { SessionStore, TokenStore } from '@agentrun/persistence';
import type { GatewayConfig } from './config';
import { approvalPayload } from './commands.controller';
import { OrgGuard, type Caller } from './org';
import { ProblemException } from './problem';

/**
 * The guard alone: the token table is a map (the real one is exercised by tests/e2e/org-case.e2e.ts),
 * the request only what the guard reads. What is checked is the org every later layer is given.
 */
const TOKENS: Record<string, string> = {
  ar_upper: 'ACME', // a row from before the token CLI lowercased orgs
  ar_lower: 'acme',
};
const tokens = { identify: async (token: string) => (TOKENS[token] ? { id: `tok_${token}`, org: TOKENS[token], subject: null } : undefined) } as unknown as TokenStore;
/** Session ids are 43 base64url characters; these two stand for sessions opened with the tokens above. */
const SESSION_UPPER = 'U'.repeat(43);
const SESSIONS: Record<string, string> = { [SESSION_UPPER]: 'ACME' };
const sessions = { lookup: async (id: string) => (SESSIONS[id] ? { org: SESSIONS[id], subject: 'alice', token_id: 'tok_1' } : undefined) } as unknown as SessionStore;
const CONFIG = { GATEWAY_SESSION_IDLE_SECONDS: 1800, GATEWAY_SESSION_MAX_SECONDS: 43200 };

async function callerOf(mode: 'local' | 'production', headers: Record<string, string>, secure = false): Promise<Caller | undefined> {
  const guard = new OrgGuard(tokens, sessions, { AGENTRUN_MODE: mode, ...CONFIG } as GatewayConfig);
  const req: { org?: string; caller?: Caller; secure: boolean; method: string; header(name: string): string | undefined } = {
    secure,
    method: 'GET',
    header: (name) => headers[name.toLowerCase()],
  };
  const context = { switchToHttp: () => ({ getRequest: () => req }) } as unknown as ExecutionContext;
  await guard.canActivate(context);
  return req.caller;
}

async function orgOf(mode: 'local' | 'production', headers: Record<string, string>): Promise<string | undefined> {
  return (await callerOf(mode, headers))?.org;
}

describe('OrgGuard: orgs that differ only in case are one org (issue 16, finding 10)', () => {
  it('lowercases X-Org in local mode', async () => {
    expect(await orgOf('local', { 'x-org': 'Acme' })).toBe('acme');
    expect(await orgOf('local', { 'x-org': 'ACME' })).toBe('acme');
    expect(await orgOf('local', { 'x-org': 'acme' })).toBe('acme');
  });

  it("lowercases a token's org, in either mode and from the bearer header or the session cookie", async () => {
    expect(await orgOf('production', { authorization: 'Bearer ar_upper' })).toBe('acme');
    expect(await orgOf('production', { cookie: `agentrun_session=${SESSION_UPPER}` })).toBe('acme');
    expect(await orgOf('local', { authorization: 'Bearer ar_upper', 'x-org': 'Other' })).toBe('acme');
    expect(await orgOf('production', { authorization: 'Bearer ar_lower' })).toBe('acme');
  });

  it('still refuses an X-Org the pattern refuses, even one Unicode lowercasing would make ASCII', async () => {
    for (const org of ['\u212Aelvin', 'a/b']) {
      const err = await orgOf('local', { 'x-org': org }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ProblemException);
      expect((err as ProblemException).getStatus()).toBe(400);
    }
  });
});

describe('OrgGuard: the session cookie (issue 16, finding 5)', () => {
  const refusal = (p: Promise<unknown>) => p.then(() => undefined, (err: unknown) => (err instanceof ProblemException ? err.getStatus() : err));

  it('takes a session id, never a token, from the cookie', async () => {
    expect(await callerOf('production', { cookie: `agentrun_session=${SESSION_UPPER}` })).toEqual({ org: 'acme', subject: 'alice', via: 'session' });
    // The cookie used to hold the token itself; a cookie holding one is not a session.
    expect(await refusal(callerOf('production', { cookie: 'agentrun_session=ar_upper' }))).toBe(401);
  });

  it('reads only the name that fits the scheme: __Host- over https, the bare name over plain http', async () => {
    expect(await callerOf('production', { cookie: `__Host-agentrun_session=${SESSION_UPPER}` }, true)).toMatchObject({ org: 'acme', via: 'session' });
    expect(await refusal(callerOf('production', { cookie: `agentrun_session=${SESSION_UPPER}` }, true))).toBe(401);
    expect(await refusal(callerOf('production', { cookie: `__Host-agentrun_session=${SESSION_UPPER}` }, false))).toBe(401);
  });

  it('says how the caller signed in, and gives local mode no subject', async () => {
    expect(await callerOf('production', { authorization: 'Bearer ar_lower' })).toEqual({ org: 'acme', subject: null, via: 'token' });
    expect(await callerOf('local', { 'x-org': 'Acme' })).toEqual({ org: 'acme', subject: null, via: 'org' });
  });
});

describe("approvalPayload: an approval is the signed-in subject's (issue 16, finding 6)", () => {
  const status = (f: () => unknown) => {
    try {
      f();
      return undefined;
    } catch (err) {
      return err instanceof ProblemException ? [err.getStatus(), (err.getResponse() as { title: string }).title] : err;
    }
  };
  const alice: Caller = { org: 'acme', subject: 'alice', via: 'session' };

  it("fills in the token's subject, or accepts the body naming it", () => {
    expect(approvalPayload(alice, {})).toEqual({ reviewer: 'alice' });
    expect(approvalPayload({ ...alice, via: 'token' }, { reviewer: 'alice' })).toEqual({ reviewer: 'alice' });
  });

  it('refuses a body naming someone else, and a token without a subject, with a 403', () => {
    expect(status(() => approvalPayload({ ...alice, subject: 'bob' }, { reviewer: 'alice' }))).toEqual([403, 'not the signed-in subject']);
    expect(status(() => approvalPayload({ ...alice, subject: null }, {}))).toEqual([403, 'no subject']);
    expect(status(() => approvalPayload({ ...alice, subject: null, via: 'token' }, { reviewer: 'alice' }))).toEqual([403, 'no subject']);
  });

  it("leaves a reviewer that is not a string to the body's validation, and takes local mode's reviewer as given", () => {
    expect(approvalPayload(alice, { reviewer: 5 })).toEqual({ reviewer: 5 });
    expect(approvalPayload({ org: 'acme', subject: null, via: 'org' }, { reviewer: 'anyone' })).toEqual({ reviewer: 'anyone' });
  });
});
