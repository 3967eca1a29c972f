import { createParamDecorator, Inject, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { ORG_PATTERN } from '@agentrun/contracts';
import { TokenStore } from '@agentrun/persistence';
import { PLATFORM_CONFIG } from '@agentrun/runtime';
import type { Request } from 'express';
import type { GatewayConfig } from './config';
import { ProblemException } from './problem';

const orgRe = new RegExp(ORG_PATTERN);

/** The session cookie POST /session sets: the bearer token itself, HttpOnly and SameSite=Strict. */
export const SESSION_COOKIE = 'agentrun_session';

type OrgRequest = Request & { org?: string };

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

/** The token a request presents: the bearer header first, then the session cookie. */
export function presentedToken(req: Request): string | undefined {
  return bearerToken(req.header('authorization')) ?? readCookie(req.header('cookie'), SESSION_COOKIE);
}

export function unauthorized(detail: string): ProblemException {
  return new ProblemException(401, 'unauthorized', detail, {}, { 'WWW-Authenticate': 'Bearer realm="agentrun"' });
}

/**
 * Who is asking. Production: only an API token (`Authorization: Bearer`, or the session cookie set
 * by POST /session) names the org, checked against the token table on every request so a revoked
 * token is refused at once; `X-Org` is ignored. Local mode: a valid token still wins; otherwise
 * the org is the `X-Org` header, unauthenticated. In both, an Authorization header that is not a
 * bearer token is a 401. Every route but health, docs and /session needs
 * one, and every query below is scoped to it, so another org's run is indistinguishable from no run.
 */
@Injectable()
export class OrgGuard implements CanActivate {
  private readonly production: boolean;

  constructor(
    private readonly tokens: TokenStore,
    @Inject(PLATFORM_CONFIG) config: GatewayConfig,
  ) {
    this.production = config.AGENTRUN_MODE === 'production';
  }

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const req = context.switchToHttp().getRequest<OrgRequest>();
    // Credentials that cannot be read are refused in either mode, never quietly passed over for X-Org.
    const authorization = req.header('authorization');
    if (authorization !== undefined && bearerToken(authorization) === undefined) {
      throw unauthorized('the Authorization header must be "Bearer <token>"');
    }
    const token = presentedToken(req);
    const tokenOrg = token === undefined ? undefined : await this.tokens.orgFor(token);
    if (tokenOrg) {
      req.org = tokenOrg;
      return true;
    }
    if (this.production) {
      throw unauthorized(
        token === undefined
          ? 'send Authorization: Bearer <token> (create one with `npm run token -- create --org ORG`) or sign in with POST /session'
          : 'the token is unknown or revoked; send a live API token',
      );
    }
    const org = req.header('x-org');
    if (!org) throw unauthorized('send the X-Org header naming your org (local mode), or Authorization: Bearer <token>');
    if (!orgRe.test(org)) throw new ProblemException(400, 'bad org', `X-Org must match ${ORG_PATTERN}`);
    req.org = org;
    return true;
  }
}

export const CurrentOrg = createParamDecorator((_: unknown, context: ExecutionContext): string => {
  const org = context.switchToHttp().getRequest<OrgRequest>().org;
  if (!org) throw new Error('CurrentOrg used on a route without OrgGuard');
  return org;
});
