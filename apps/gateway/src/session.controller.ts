import { Body, Controller, Delete, Get, HttpCode, Inject, Post, Req, Res, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { SessionStore, TokenStore, type SessionLimits } from '@agentrun/persistence';
import { PLATFORM_CONFIG } from '@agentrun/runtime';
import type { Request, Response } from 'express';
import { ApiJson, ApiOrgScoped, ApiProblems, SECURITY } from './api-docs';
import type { GatewayConfig } from './config';
import { bearerToken, CurrentCaller, OrgGuard, presentedSession, SECURE_SESSION_COOKIE, SESSION_COOKIE, sessionCookieName, sessionLimits, unauthorized, type Caller } from './org';
import { ProblemException } from './problem';

/**
 * The cookie's attributes: never readable by scripts, never sent cross-site, on every path. Over https
 * it is Secure and `__Host-` prefixed (see SESSION_COOKIE).
 */
function cookie(req: Request, value: string, extra: string[]): string {
  return [`${sessionCookieName(req)}=${value}`, 'HttpOnly', 'SameSite=Strict', 'Path=/', ...extra, ...(req.secure ? ['Secure'] : [])].join('; ');
}

/**
 * A browser session: POST /session trades an API token (bearer header or `{ "token": ... }`) for an
 * HttpOnly cookie holding an opaque session id, so a page can use the API and the SSE stream without
 * script access to the token, and the token never travels again. The session is checked on every
 * request: it ends when signed out (DELETE /session), after GATEWAY_SESSION_IDLE_SECONDS without a
 * request, GATEWAY_SESSION_MAX_SECONDS after sign-in, or when its token is revoked.
 */
@ApiTags('session')
@Controller('session')
export class SessionController {
  private readonly limits: SessionLimits;

  constructor(
    private readonly tokens: TokenStore,
    private readonly sessions: SessionStore,
    @Inject(PLATFORM_CONFIG) config: GatewayConfig,
  ) {
    this.limits = sessionLimits(config);
  }

  @Post()
  @HttpCode(204)
  @ApiOperation({ summary: 'Trade an API token (bearer header, or the body) for a session cookie' })
  @ApiBearerAuth(SECURITY.bearer)
  @ApiBody({
    required: false,
    schema: { type: 'object', properties: { token: { type: 'string', description: 'the API token, when not in the Authorization header' } } },
  })
  @ApiResponse({
    status: 204,
    description: `signed in: \`Set-Cookie: ${SECURE_SESSION_COOKIE}=<session id>\` (HttpOnly, SameSite=Strict, Secure, Path=/) over https, \`${SESSION_COOKIE}=<session id>\` over plain http; the id is not the token`,
    headers: { 'Set-Cookie': { schema: { type: 'string' } } },
  })
  @ApiProblems(400, 401, 413, 415)
  async create(@Req() req: Request, @Res({ passthrough: true }) res: Response, @Body() body: unknown): Promise<void> {
    // The body is optional, but one that is sent is held to its schema even when the header carries the token.
    const isObject = typeof body === 'object' && body !== null && !Array.isArray(body);
    if (!isObject && body !== undefined) throw new ProblemException(400, 'bad request', 'the body, when sent, must be a JSON object {"token": "..."}');
    const given = isObject && 'token' in body ? (body as { token: unknown }).token : undefined;
    if (given !== undefined && typeof given !== 'string') throw new ProblemException(400, 'bad request', 'token must be a string');
    const token = bearerToken(req.header('authorization')) ?? given;
    if (token === undefined) throw unauthorized('send Authorization: Bearer <token> or a JSON body {"token": "..."}');
    const identity = await this.tokens.identify(token);
    if (!identity) throw unauthorized('the token is unknown or revoked; send a live API token');
    const session = await this.sessions.open(identity, this.limits);
    // The browser drops the cookie when the server would refuse it anyway; idle expiry is the server's alone.
    res.setHeader('Set-Cookie', cookie(req, session.id, [`Max-Age=${this.limits.maxSeconds}`]));
    res.setHeader('Cache-Control', 'no-store');
  }

  @Get()
  @UseGuards(OrgGuard)
  @ApiOperation({ summary: 'Who the request speaks for: its org, its subject (who may approve) and how it signed in' })
  @ApiOrgScoped()
  @ApiJson(200, 'the caller', {
    type: 'object',
    required: ['org', 'subject', 'via'],
    properties: {
      org: { type: 'string' },
      subject: { type: ['string', 'null'], description: "who the token was made for; null for a token without one (it cannot approve) and for local mode's X-Org" },
      via: { type: 'string', enum: ['token', 'session', 'org'] },
    },
  })
  whoami(@CurrentCaller() caller: Caller, @Res({ passthrough: true }) res: Response): Caller {
    res.setHeader('Cache-Control', 'no-store');
    return { org: caller.org, subject: caller.subject, via: caller.via };
  }

  @Delete()
  @HttpCode(204)
  @ApiOperation({ summary: 'Sign out: the session is revoked on the server and the cookie cleared', security: [] })
  @ApiResponse({ status: 204, description: 'signed out: the session no longer answers, whoever holds its cookie, and the cookie is cleared', headers: { 'Set-Cookie': { schema: { type: 'string' } } } })
  async end(@Req() req: Request, @Res({ passthrough: true }) res: Response): Promise<void> {
    const sessionId = presentedSession(req);
    if (sessionId !== undefined) await this.sessions.revoke(sessionId);
    res.setHeader('Set-Cookie', cookie(req, '', ['Max-Age=0', 'Expires=Thu, 01 Jan 1970 00:00:00 GMT']));
  }
}
