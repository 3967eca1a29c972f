import { Body, Controller, Delete, HttpCode, Post, Req, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { TokenStore } from '@agentrun/persistence';
import type { Request, Response } from 'express';
import { ApiProblems, SECURITY } from './api-docs';
import { bearerToken, SESSION_COOKIE, unauthorized } from './org';
import { ProblemException } from './problem';

/** The cookie's attributes: never readable by scripts, never sent cross-site, Secure over https. */
function cookie(req: Request, value: string, extra: string[] = []): string {
  return [`${SESSION_COOKIE}=${value}`, 'HttpOnly', 'SameSite=Strict', 'Path=/', ...extra, ...(req.secure ? ['Secure'] : [])].join('; ');
}

/**
 * A browser session: POST /session trades an API token (bearer header or `{ "token": ... }`) for an
 * HttpOnly cookie holding it, so a page can use the API and the SSE stream without script access to
 * the token. The cookie is checked like the bearer header, on every request, so revoking the token
 * ends the session too.
 */
@ApiTags('session')
@Controller('session')
export class SessionController {
  constructor(private readonly tokens: TokenStore) {}

  @Post()
  @HttpCode(204)
  @ApiOperation({ summary: 'Trade an API token (bearer header, or the body) for a session cookie' })
  @ApiBearerAuth(SECURITY.bearer)
  @ApiBody({
    required: false,
    schema: { type: 'object', properties: { token: { type: 'string', description: 'the API token, when not in the Authorization header' } } },
  })
  @ApiResponse({ status: 204, description: `signed in: \`Set-Cookie: ${SESSION_COOKIE}=...\` (HttpOnly, SameSite=Strict)`, headers: { 'Set-Cookie': { schema: { type: 'string' } } } })
  @ApiProblems(400, 401, 413, 415)
  async create(@Req() req: Request, @Res({ passthrough: true }) res: Response, @Body() body: unknown): Promise<void> {
    let token = bearerToken(req.header('authorization'));
    if (token === undefined && typeof body === 'object' && body !== null && !Array.isArray(body) && 'token' in body) {
      const given = (body as { token: unknown }).token;
      if (typeof given !== 'string') throw new ProblemException(400, 'bad request', 'token must be a string');
      token = given;
    }
    if (token === undefined) throw unauthorized('send Authorization: Bearer <token> or a JSON body {"token": "..."}');
    if (!(await this.tokens.orgFor(token))) throw unauthorized('the token is unknown or revoked; send a live API token');
    res.setHeader('Set-Cookie', cookie(req, token));
    res.setHeader('Cache-Control', 'no-store');
  }

  @Delete()
  @HttpCode(204)
  @ApiOperation({ summary: 'Clear the session cookie', security: [] })
  @ApiResponse({ status: 204, description: 'signed out: the cookie is cleared', headers: { 'Set-Cookie': { schema: { type: 'string' } } } })
  end(@Req() req: Request, @Res({ passthrough: true }) res: Response): void {
    res.setHeader('Set-Cookie', cookie(req, '', ['Max-Age=0', 'Expires=Thu, 01 Jan 1970 00:00:00 GMT']));
  }
}
