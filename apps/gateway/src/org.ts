import { createParamDecorator, Inject, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { normaliseOrg, ORG_PATTERN } from '@agentrun/contracts';
import { SessionStore, TokenStore, type SessionLimits } from '@agentrun/persistence';
import { PLATFORM_CONFIG } from '@agentrun/runtime';
import type { Request } from 'express';
import type { GatewayConfig } from './config';
import { ProblemException } from './problem';
import { fromOwnOrigin, WRITE_METHODS } from './web-security';

const orgRe = new RegExp(ORG_PATTERN);

/**
 * The session cookie POST /session sets: an opaque session id, HttpOnly and SameSite=Strict. Over
 * https (TLS, or a trusted proxy's X-Forwarded-Proto) it is `__Host-agentrun_session` with Secure: the
 * prefix makes the browser refuse the cookie unless it is Secure, host-only and Path=/, so a sibling
 * subdomain or a plain-http page cannot plant or shadow it. Browsers refuse a `__Host-` cookie without
 * Secure, and Secure cookies over plain http, so plain http (local development) uses the bare name.
 */
export const SESSION_COOKIE = 'agentrun_session';
export const SECURE_SESSION_COOKIE = `__Host-${SESSION_COOKIE}`;

/** The session cookie's name for this request: the one the browser can have been given over its scheme. */
export function sessionCookieName(req: Pick<Request, 'secure'>): string {
  return req.secure ? SECURE_SESSION_COOKIE : SESSION_COOKIE;
}

/**
 * Who a request speaks for. `via`: `token` (a bearer header), `session` (the session cookie) or `org`
 * (local mode's X-Org, unauthenticated). `subject`: who the token was made for, or null.
 */
export interface Caller {
  org: string;
  subject: string | null;
  via: 'token' | 'session' | 'org';
}

type OrgRequest = Request & { org?: string; caller?: Caller };

/** The session limits the gateway is configured with. */
export function sessionLimits(config: Pick<GatewayConfig, 'GATEWAY_SESSION_IDLE_SECONDS' | 'GATEWAY_SESSION_MAX_SECONDS'>): SessionLimits {
  return { idleSeconds: config.GATEWAY_SESSION_IDLE_SECONDS, maxSeconds: config.GATEWAY_SESSION_MAX_SECONDS };
}

/** The value of one cookie in a `Cookie` header, or undefined. The first of a repeated name wins. */
export function readCookie(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0 || part.slice(0, eq).trim() !== name) continue;
    let value = part.slice(eq + 1).trim();
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
    return value || undefined;
  }
  return undefined;
}

/** The token of an `Authorization: Bearer <token>` header, or undefined. */
export function bearerToken(header: string | undefined): string | undefined {
  const m = header ? /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header) : null;
  return m ? m[1] : undefined;
}

/** The session id a request presents in the cookie its scheme allows, or undefined. */
export function presentedSession(req: Request): string | undefined {
  return readCookie(req.header('cookie'), sessionCookieName(req));
}

export function unauthorized(detail: string): ProblemException {
  return new ProblemException(401, 'unauthorized', detail, {}, { 'WWW-Authenticate': 'Bearer realm="agentrun"' });
}

/**
 * Who is asking. Production: only an API token (`Authorization: Bearer`) or a live session (the cookie
 * set by POST /session) names the org, checked on every request so a revoked token or a signed-out or
 * expired session is refused at once; `X-Org` is ignored. Local mode: a valid token or session still wins; otherwise
 * the org is the `X-Org` header, unauthenticated. In both, an Authorization header that is not a
 * bearer token is a 401. Every route but health, docs and /session needs
 * one, and every query below is scoped to it, so another org's run is indistinguishable from no run.
 * Either way the org is normalised (lowercase, see normaliseOrg): `X-Org: Acme` and a token made
 * for `ACME` (before the token CLI lowercased orgs) both act as `acme`.
 * A write signed in by the session cookie alone must also come from the gateway's own pages (a 403
 * otherwise): the browser attaches the cookie to a request another page on the same site makes.
 */
@Injectable()
export class OrgGuard implements CanActivate {
  private readonly production: boolean;
  private readonly limits: SessionLimits;

  constructor(
    private readonly tokens: TokenStore,
    private readonly sessions: SessionStore,
    @Inject(PLATFORM_CONFIG) config: GatewayConfig,
  ) {
    this.production = config.AGENTRUN_MODE === 'production';
    this.limits = sessionLimits(config);
  }

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const req = context.switchToHttp().getRequest<OrgRequest>();
    // Credentials that cannot be read are refused in either mode, never quietly passed over for X-Org.
    const authorization = req.header('authorization');
    const token = bearerToken(authorization);
    if (authorization !== undefined && token === undefined) {
      throw unauthorized('the Authorization header must be "Bearer <token>"');
    }
    // A bearer header is set by a client's own code; the cookie is attached by the browser, whoever's page asks.
    const sessionId = token === undefined ? presentedSession(req) : undefined;
    const caller = await this.authenticate(token, sessionId);
    if (caller) {
      if (caller.via === 'session' && WRITE_METHODS.has(req.method) && !fromOwnOrigin(req)) {
        throw new ProblemException(
          403,
          'cross-origin request',
          "a request that changes state and is signed in by the session cookie must come from this gateway's own pages (Origin, or Sec-Fetch-Site: same-origin); other clients send Authorization: Bearer <token>",
        );
      }
      return this.admit(req, caller);
    }
    if (this.production) {
      throw unauthorized(
        token !== undefined
          ? 'the token is unknown or revoked; send a live API token'
          : sessionId !== undefined
            ? 'the session has ended (signed out, expired, or its token was revoked); sign in again with POST /session'
            : 'send Authorization: Bearer <token> (create one with `npm run token -- create --org ORG --subject WHO`) or sign in with POST /session',
      );
    }
    const org = req.header('x-org');
    if (!org) throw unauthorized('send the X-Org header naming your org (local mode), or Authorization: Bearer <token>');
    if (!orgRe.test(org)) throw new ProblemException(400, 'bad org', `X-Org must match ${ORG_PATTERN}`);
    return this.admit(req, { org, subject: null, via: 'org' });
  }

  private async authenticate(token: string | undefined, sessionId: string | undefined): Promise<Caller | undefined> {
    if (token !== undefined) {
      const identity = await this.tokens.identify(token);
      return identity && { org: identity.org, subject: identity.subject, via: 'token' };
    }
    if (sessionId !== undefined) {
      const identity = await this.sessions.lookup(sessionId, this.limits);
      return identity && { org: identity.org, subject: identity.subject, via: 'session' };
    }
    return undefined;
  }

  private admit(req: OrgRequest, caller: Caller): true {
    const org = normaliseOrg(caller.org);
    req.org = org;
    req.caller = { ...caller, org };
    return true;
  }
}

export const CurrentOrg = createParamDecorator((_: unknown, context: ExecutionContext): string => {
  const org = context.switchToHttp().getRequest<OrgRequest>().org;
  if (!org) throw new Error('CurrentOrg used on a route without OrgGuard');
  return org;
});

/** Who the request speaks for (set by OrgGuard). */
export const CurrentCaller = createParamDecorator((_: unknown, context: ExecutionContext): Caller => {
  const caller = context.switchToHttp().getRequest<OrgRequest>().caller;
  if (!caller) throw new Error('CurrentCaller used on a route without OrgGuard');
  return caller;
});
