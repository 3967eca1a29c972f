import { Controller, Get, Injectable, Param, Req, Res } from '@nestjs/common';
import { ApiOperation, ApiParam, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { OpenAPIObject } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { dirname } from 'node:path';
import { PROBLEM_CONTENT } from './api-docs';
import { ProblemException, sendProblem } from './problem';

/** The document this gateway serves, built from its own routes once the app is assembled (see openapi.ts). */
@Injectable()
export class ApiDocument {
  private document?: OpenAPIObject;

  publish(document: OpenAPIObject): void {
    this.document = document;
  }

  get(): OpenAPIObject {
    if (!this.document) throw new ProblemException(503, 'docs not ready', 'the OpenAPI document is built while the gateway starts; retry');
    return this.document;
  }
}

/** Swagger UI's files, served from the installed package so the page works offline. */
const UI_DIR = dirname(require.resolve('swagger-ui-dist/package.json'));
const UI_FILES: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
};
/** Our own start-up script: a file, not inline, so the page's CSP can forbid inline script. */
const INIT_SCRIPT = `window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({ url: '/docs/openapi.json', dom_id: '#api', deepLinking: true, validatorUrl: null, tryItOutEnabled: false });
});
`;
const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>AgentRun gateway API</title>
<link rel="icon" type="image/png" href="/docs/assets/favicon-32x32.png">
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
<div id="api"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/assets/init.js"></script>
</body>
</html>
`;
/**
 * As strict as the dashboard's, except for styles: Swagger UI sets inline style attributes, and
 * refusing them only breaks the layout. Scripts still come from this origin only.
 */
const PAGE_HEADERS: Record<string, string> = {
  'Content-Security-Policy':
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'",
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'same-origin',
  'Cache-Control': 'no-cache',
};

const DOCUMENT_SCHEMA = { type: 'object', required: ['openapi', 'info', 'paths'], properties: { openapi: { type: 'string' } } };

@ApiTags('docs')
@Controller('docs')
export class DocsController {
  constructor(private readonly document: ApiDocument) {}

  /** One URL for people and programs: a browser (asking for HTML) gets the reference page, anything else the document. */
  @Get()
  @ApiOperation({ summary: 'The API reference: the page for a browser, the OpenAPI document otherwise', security: [] })
  @ApiResponse({
    status: 200,
    description: 'the OpenAPI document, or the reference page when the client prefers text/html',
    content: { 'application/json': { schema: DOCUMENT_SCHEMA }, 'text/html': { schema: { type: 'string' } } },
  })
  index(@Req() req: Request, @Res() res: Response): void {
    // The answer depends on Accept, so caches must key on it.
    res.vary('Accept');
    if (req.accepts(['application/json', 'text/html']) === 'text/html') {
      res.status(200).set(PAGE_HEADERS).type('text/html; charset=utf-8').send(PAGE);
      return;
    }
    res.status(200).json(this.document.get());
  }

  @Get('openapi.json')
  @ApiOperation({ summary: "The gateway's OpenAPI document", security: [] })
  @ApiResponse({ status: 200, description: 'the OpenAPI 3.1 document', content: { 'application/json': { schema: DOCUMENT_SCHEMA } } })
  openapi(): OpenAPIObject {
    return this.document.get();
  }

  @Get('assets/:file')
  @ApiOperation({ summary: "The reference page's script, styles and icon", security: [] })
  @ApiParam({ name: 'file', required: true, schema: { enum: [...Object.keys(UI_FILES), 'init.js'] } })
  @ApiResponse({
    status: 200,
    description: 'the file',
    content: { 'text/css': { schema: { type: 'string' } }, 'text/javascript': { schema: { type: 'string' } }, 'image/png': { schema: { type: 'string' } } },
  })
  @ApiResponse({ status: 404, description: 'not one of the page\'s files', content: PROBLEM_CONTENT })
  asset(@Param('file') file: string, @Res() res: Response): void {
    if (file === 'init.js') {
      res.status(200).set(PAGE_HEADERS).type('text/javascript; charset=utf-8').send(INIT_SCRIPT);
      return;
    }
    const type = Object.prototype.hasOwnProperty.call(UI_FILES, file) ? UI_FILES[file] : undefined;
    if (!type) throw new ProblemException(404, 'not found', `the reference page has no file '${file}'`);
    res.sendFile(file, { root: UI_DIR, dotfiles: 'deny', headers: { ...PAGE_HEADERS, 'Content-Type': type } }, (err?: Error) => {
      if (err && !res.headersSent) sendProblem(res, { type: 'about:blank', title: 'not found', status: 404, detail: `could not send ${file}` });
    });
  }
}
