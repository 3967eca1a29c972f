import { Controller, Get, Param, Req, Res } from '@nestjs/common';
import { ApiOperation, ApiParam, ApiResponse, ApiTags } from '@nestjs/swagger';
import { DASHBOARD_ASSETS, DASHBOARD_PUBLIC_DIR } from '@agentrun/dashboard';
import type { Request, Response } from 'express';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { PROBLEM_CONTENT } from './api-docs';
import { ProblemException, sendProblem } from './problem';

/** Where the dashboard lives on the gateway: same origin as the API, so the session cookie just works. */
export const DASHBOARD_PATH = '/ui';

const ASSETS = new Set<string>(DASHBOARD_ASSETS);
const HTML = { 'text/html': { schema: { type: 'string' } } };

/**
 * The page may load and connect to this origin only: no inline script, nothing from elsewhere
 * (everything is bundled, so it works offline too).
 */
const PAGE_HEADERS: Record<string, string> = {
  'Content-Security-Policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'",
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'same-origin',
  // Names are not content-hashed: revalidate (ETag) on every load so a new build shows at once.
  'Cache-Control': 'no-cache',
};

/**
 * Serves the dashboard built into `libs/dashboard/dist/public`: `/` and `/ui` redirect to `/ui/`,
 * `/ui/app.js` and `/ui/app.css` are its assets, and any other `/ui/...` page (e.g. `/ui/runs/{id}`)
 * is the single page, which routes itself. Auth is the API's business: the page calls it.
 */
@ApiTags('dashboard')
@Controller()
export class DashboardController {
  @Get()
  @ApiOperation({ summary: 'Redirects to the dashboard', security: [] })
  @ApiResponse({ status: 302, description: 'to /ui/', headers: { Location: { schema: { type: 'string' } } } })
  root(@Res() res: Response): void {
    res.redirect(302, `${DASHBOARD_PATH}/`);
  }

  @Get('ui')
  @ApiOperation({ summary: 'The dashboard page', security: [] })
  @ApiResponse({ status: 200, description: 'the page', content: HTML })
  @ApiResponse({ status: 301, description: 'to /ui/', headers: { Location: { schema: { type: 'string' } } } })
  @ApiResponse({ status: 404, description: 'the dashboard is not built', content: PROBLEM_CONTENT })
  index(@Req() req: Request, @Res() res: Response): void {
    if (!req.path.endsWith('/')) return res.redirect(301, `${DASHBOARD_PATH}/`);
    this.send(res, 'index.html');
  }

  @Get('ui/*path')
  @ApiOperation({ summary: "The dashboard's assets, and its pages (any other path under /ui/)", security: [] })
  @ApiParam({ name: 'path', required: true, schema: { type: 'string' } })
  @ApiResponse({
    status: 200,
    description: 'an asset, or the page',
    content: { ...HTML, 'text/javascript': { schema: { type: 'string' } }, 'text/css': { schema: { type: 'string' } } },
  })
  @ApiResponse({ status: 404, description: 'no such asset, or the dashboard is not built', content: PROBLEM_CONTENT })
  page(@Param('path') path: string[] | string, @Res() res: Response): void {
    const segments = Array.isArray(path) ? path : String(path).split('/');
    const name = segments.join('/');
    if (ASSETS.has(name)) return this.send(res, name);
    // The assets sit at the top; a file name there that is not ours is a 404. Deeper paths are
    // pages of the app (a run id may contain dots), which routes itself.
    if (segments.length === 1 && name.includes('.')) throw new ProblemException(404, 'not found', `the dashboard has no file '${name}'`);
    this.send(res, 'index.html');
  }

  private send(res: Response, name: string): void {
    if (!existsSync(join(DASHBOARD_PUBLIC_DIR, name))) {
      throw new ProblemException(404, 'dashboard not built', `${name} is missing from ${DASHBOARD_PUBLIC_DIR}: run npm run build`);
    }
    res.sendFile(name, { root: DASHBOARD_PUBLIC_DIR, dotfiles: 'deny', headers: PAGE_HEADERS }, (err?: Error) => {
      if (err && !res.headersSent) {
        sendProblem(res, { type: 'about:blank', title: 'not found', status: 404, detail: `could not send ${name}` });
      }
    });
  }
}
