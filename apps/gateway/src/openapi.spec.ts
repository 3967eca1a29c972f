import type { INestApplication } from '@nestjs/common';
import type { OpenAPIObject } from '@nestjs/swagger';
import { Test } from '@nestjs/testing';
import { CommandService } from '@agentrun/commands';
import { Database, Kafka, Temporal } from '@agentrun/runtime';
import type { AddressInfo } from 'node:net';
import { loadGatewayConfig } from './config';
import { GatewayModule } from './gateway.module';
import { LiveEventsHub } from './live-events.hub';
import { LiveTokensHub } from './live-tokens.hub';
import { publishOpenApiDocument } from './openapi';

/** A route as the Express router holds it. */
interface RouteLayer {
  route?: { path: string; _methods(): string[] };
}

/** `/runs/:id/snapshots/:snapshotId/archive` and `/ui/*path` as OpenAPI spells them. */
function openApiPath(expressPath: string): string {
  return expressPath.replace(/[:*]([A-Za-z0-9_]+)/g, '{$1}');
}

/**
 * The whole gateway module, with the clients of Postgres, Kafka and Temporal replaced by inert
 * values: nothing here touches the stack, yet every controller is registered on the real router.
 */
describe("the gateway's OpenAPI document", () => {
  let app: INestApplication;
  let document: OpenAPIObject;
  let base: string;

  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({ imports: [GatewayModule.forRoot(loadGatewayConfig())] })
      .overrideProvider(Database)
      .useValue({ dataSource: {} })
      .overrideProvider(Kafka)
      .useValue({ bus: {}, topicPrefix: '' })
      .overrideProvider(Temporal)
      .useValue({})
      .overrideProvider(LiveEventsHub)
      .useValue({})
      .overrideProvider(LiveTokensHub)
      .useValue({})
      .overrideProvider(CommandService)
      .useValue({})
      .compile();
    app = moduleRef.createNestApplication({ logger: false });
    document = publishOpenApiDocument(app);
    await app.listen(0, '127.0.0.1');
    base = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await app?.close();
  });

  function servedRoutes(): string[] {
    const stack = (app.getHttpAdapter().getInstance() as { router: { stack: RouteLayer[] } }).router.stack;
    const routes: string[] = [];
    for (const layer of stack) {
      if (!layer.route) continue;
      for (const method of layer.route._methods()) {
        // Express answers HEAD from the GET handler; the document lists the GET.
        if (method !== 'HEAD') routes.push(`${method} ${openApiPath(layer.route.path)}`);
      }
    }
    return routes.sort();
  }

  function documentedRoutes(): string[] {
    const routes: string[] = [];
    for (const [path, item] of Object.entries(document.paths)) {
      for (const method of ['get', 'put', 'post', 'delete', 'patch', 'options', 'head'] as const) {
        if (item[method]) routes.push(`${method.toUpperCase()} ${path}`);
      }
    }
    return routes.sort();
  }

  it('lists every route the gateway serves, and nothing it does not', () => {
    const served = servedRoutes();
    expect(served.length).toBeGreaterThan(20);
    expect(served.filter((route) => !documentedRoutes().includes(route))).toEqual([]);
    expect(documentedRoutes().filter((route) => !served.includes(route))).toEqual([]);
  });

  it('includes the snapshot, archive, trajectory and fork routes', () => {
    expect(documentedRoutes()).toEqual(
      expect.arrayContaining(['GET /runs/{id}/snapshots', 'GET /runs/{id}/snapshots/{snapshotId}/archive', 'GET /runs/{id}/snapshots/{snapshotId}/trajectory', 'POST /runs/{id}/fork']),
    );
  });

  it('describes each body with the constraints the gateway enforces', () => {
    type Schema = { type?: string; required?: string[]; additionalProperties?: boolean; properties: Record<string, { pattern?: string }> };
    const body = (path: string) => (document.paths[path].post?.requestBody as { content: Record<string, { schema: Schema }> }).content['application/json'].schema;
    const start = body('/agents');
    expect(start).toMatchObject({ type: 'object', additionalProperties: false, required: ['goal'] });
    expect(start.properties.max_steps).toEqual({ type: 'integer', minimum: 1, maximum: 10_000 });
    expect(start.properties.run_id.pattern).toBeDefined();
    // The fork's source comes from the path, so the body need not name it.
    expect(body('/runs/{id}/fork').required).toEqual(['snapshot_id']);
    expect(body('/runs/{id}/pause')).toMatchObject({ type: 'object', additionalProperties: false });
    // An eval needs a reviewer (the handler refuses one without); an approval's reviewer is the token's subject.
    expect(body('/evals').required).toEqual(['model', 'reviewers']);
    expect(body('/evals').properties.reviewers).toMatchObject({ type: 'array', minItems: 1 });
    expect(body('/runs/{id}/approve').required ?? []).toEqual([]);
    // A series that never captures is refused where the gateway refuses it: an eval's cases always take the final one.
    const snapshots = (path: string) => (body(path).properties as unknown as Record<string, { anyOf?: unknown[] }>).snapshots;
    expect(snapshots('/agents').anyOf).toHaveLength(3);
    expect(snapshots('/runs/{id}/fork').anyOf).toHaveLength(3);
    expect(snapshots('/evals').anyOf).toBeUndefined();
  });

  it('lists a problem for every error status it documents, and the security of each guarded route', () => {
    const errors = Object.entries(document.paths).flatMap(([path, item]) =>
      [item.get, item.post, item.delete].flatMap((operation) =>
        Object.entries(operation?.responses ?? {})
          .filter(([status]) => Number(status) >= 400)
          .map(([status, response]) => ({ path, status, content: Object.keys((response as { content?: object }).content ?? {}) })),
      ),
    );
    expect(errors.length).toBeGreaterThan(0);
    expect(errors).toEqual(errors.map(({ path, status }) => ({ path, status, content: ['application/problem+json'] })));
    expect(document.paths['/runs'].get?.security).toEqual(expect.arrayContaining([{ bearer: [] }, { session: [] }, { org: [] }]));
    expect(document.paths['/livez'].get?.security).toEqual([]);
    expect(Object.keys(document.components?.securitySchemes ?? {}).sort()).toEqual(['bearer', 'org', 'session']);
  });

  it('documents the web checks: 421 on every operation but health, 403 on every write the session cookie may sign in', () => {
    const writes: string[] = [];
    for (const [path, item] of Object.entries(document.paths)) {
      for (const method of ['get', 'post', 'delete'] as const) {
        const operation = item[method];
        if (!operation) continue;
        const statuses = Object.keys(operation.responses);
        expect({ path, method, has421: statuses.includes('421') }).toEqual({ path, method, has421: !['/livez', '/readyz', '/metrics'].includes(path) });
        if (statuses.includes('403')) writes.push(`${method.toUpperCase()} ${path}`);
      }
    }
    // Every guarded write, and nothing else: not a read, not /session (no cookie signs it in).
    expect(writes.sort()).toEqual(documentedRoutes().filter((r) => r.startsWith('POST ') && !['POST /session'].includes(r)));
  });

  it("links each started run to its reads, and a run's snapshot list to the first snapshot's, by operations that exist", () => {
    type Link = { operationId: string; parameters: Record<string, string> };
    const operations = new Map<string, { path: string; parameters: { name: string; in: string }[] }>();
    for (const [path, item] of Object.entries(document.paths)) {
      for (const operation of [item.get, item.post, item.delete]) {
        if (operation?.operationId) operations.set(operation.operationId, { path, parameters: (operation.parameters ?? []) as { name: string; in: string }[] });
      }
    }
    const links: string[] = [];
    for (const [path, item] of Object.entries(document.paths)) {
      for (const [method, operation] of [['POST', item.post], ['GET', item.get]] as const) {
        for (const [status, response] of Object.entries(operation?.responses ?? {})) {
          for (const [name, link] of Object.entries((response as { links?: Record<string, Link> }).links ?? {})) {
            const target = operations.get(link.operationId);
            links.push(`${method} ${path} ${status} ${name} -> ${target?.path}`);
            // Each of the target's path parameters comes from the response, and nothing else is named.
            const pathParameters = (target?.parameters ?? []).filter((p) => p.in === 'path').map((p) => p.name);
            expect({ name, parameters: Object.keys(link.parameters).sort() }).toEqual({ name, parameters: pathParameters.sort() });
            for (const expression of Object.values(link.parameters)) expect(expression).toMatch(/^\$response\.body#\//);
          }
        }
      }
    }
    expect(links.sort()).toEqual(
      [
        'POST /agents 202 GetRun -> /runs/{id}',
        'POST /agents 202 ListRunSnapshots -> /runs/{id}/snapshots',
        'POST /agents 202 GetRunConversation -> /runs/{id}/conversation',
        'POST /runs/{id}/fork 202 GetRun -> /runs/{id}',
        'POST /runs/{id}/fork 202 ListRunSnapshots -> /runs/{id}/snapshots',
        'POST /runs/{id}/fork 202 GetRunConversation -> /runs/{id}/conversation',
        'POST /evals 202 GetRun -> /runs/{id}',
        'POST /evals 202 ListRunSnapshots -> /runs/{id}/snapshots',
        'POST /evals 202 GetRunResults -> /runs/{id}/results',
        'GET /runs/{id}/snapshots 200 ListSnapshotFiles -> /runs/{id}/snapshots/{snapshotId}/files',
        'GET /runs/{id}/snapshots 200 GetSnapshotArchive -> /runs/{id}/snapshots/{snapshotId}/archive',
        'GET /runs/{id}/snapshots 200 GetSnapshotTrajectory -> /runs/{id}/snapshots/{snapshotId}/trajectory',
      ].sort(),
    );
  });

  it('answers an unsupported method on a known path with 405 and Allow, and an unknown path with 404', async () => {
    const cases: [string, string, number, string | null][] = [
      ['GET', '/agents', 405, 'POST'],
      ['DELETE', '/runs/r-1', 405, 'GET, HEAD'],
      ['PUT', '/runs/r-1/snapshots/s-1/archive', 405, 'GET, HEAD'],
      ['PATCH', '/session', 405, 'POST, GET, HEAD, DELETE'],
      ['POST', '/runs/r-1/explode', 404, null],
      ['GET', '/nowhere', 404, null],
    ];
    for (const [method, path, status, allow] of cases) {
      const res = await fetch(base + path, { method });
      expect({ method, path, status: res.status, allow: res.headers.get('allow'), type: res.headers.get('content-type') }).toEqual({
        method,
        path,
        status,
        allow,
        type: expect.stringMatching(/^application\/problem\+json/),
      });
    }
  });

  it('serves the document as JSON and an offline reference page whose assets come from this origin', async () => {
    const json = await fetch(`${base}/docs/openapi.json`);
    expect((await json.json()).openapi).toBe('3.1.0');
    // The old URL keeps answering programs with the document.
    expect((await (await fetch(`${base}/docs`)).json()).paths['/agents']).toBeDefined();
    const page = await fetch(`${base}/docs`, { headers: { Accept: 'text/html,application/xhtml+xml,*/*;q=0.8' } });
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(page.headers.get('content-security-policy')).toMatch(/script-src 'self';/);
    const html = await page.text();
    const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    expect(assets.every((url) => url.startsWith('/docs/assets/'))).toBe(true);
    for (const url of assets) {
      const res = await fetch(base + url);
      expect({ url, status: res.status }).toEqual({ url, status: 200 });
      await res.arrayBuffer();
    }
  });
});
