import type { INestApplication } from '@nestjs/common';
import { DocumentBuilder, SwaggerModule, type OpenAPIObject } from '@nestjs/swagger';
import {
  CASE_RESULT_PAGE_SCHEMA,
  CASE_RESULT_ROW_SCHEMA,
  COMMAND_ACCEPTED_SCHEMA,
  DATASET_LIST_SCHEMA,
  DATASET_SCHEMA,
  EVAL_COMPARISON_SCHEMA,
  PROBLEM_SCHEMA,
  RUN_CONVERSATION_SCHEMA,
  RUN_DIFF_SCHEMA,
  RUN_DETAIL_SCHEMA,
  RUN_EVENT_SCHEMA,
  RUN_SUMMARY_SCHEMA,
  RUNS_PAGE_SCHEMA,
  SNAPSHOT_DIFF_SCHEMA,
  SNAPSHOT_FILE_LIST_SCHEMA,
  SNAPSHOT_LIST_SCHEMA,
  SNAPSHOT_ROW_SCHEMA,
  USAGE_REPORT_SCHEMA,
} from '@agentrun/contracts';
import { embeddable, PROBLEM_CONTENT, problemResponse, SECURITY, type JsonSchema } from './api-docs';
import { ApiDocument } from './docs.controller';
import { SESSION_COOKIE, SECURE_SESSION_COOKIE } from './org';
import { HOST_CHECK_EXEMPT_PATHS, WRITE_METHODS } from './web-security';

/** The shapes the gateway answers with, named in the document's components; each is declared once, in the contracts. */
export const API_SCHEMAS: Record<string, JsonSchema> = {
  Problem: embeddable(PROBLEM_SCHEMA),
  Accepted: embeddable(COMMAND_ACCEPTED_SCHEMA),
  RunSummary: embeddable(RUN_SUMMARY_SCHEMA),
  RunPage: embeddable(RUNS_PAGE_SCHEMA),
  RunDetail: embeddable(RUN_DETAIL_SCHEMA),
  RunConversation: embeddable(RUN_CONVERSATION_SCHEMA),
  RunEvent: embeddable(RUN_EVENT_SCHEMA),
  SnapshotRow: embeddable(SNAPSHOT_ROW_SCHEMA),
  SnapshotList: embeddable(SNAPSHOT_LIST_SCHEMA),
  SnapshotFileList: embeddable(SNAPSHOT_FILE_LIST_SCHEMA),
  SnapshotDiff: embeddable(SNAPSHOT_DIFF_SCHEMA),
  RunDiff: embeddable(RUN_DIFF_SCHEMA),
  Dataset: embeddable(DATASET_SCHEMA),
  DatasetList: embeddable(DATASET_LIST_SCHEMA),
  CaseResultRow: embeddable(CASE_RESULT_ROW_SCHEMA),
  CaseResultPage: embeddable(CASE_RESULT_PAGE_SCHEMA),
  EvalComparison: embeddable(EVAL_COMPARISON_SCHEMA),
  UsageReport: embeddable(USAGE_REPORT_SCHEMA),
};

/**
 * The health routes come from the runtime lib, shared by every service; what they answer is
 * described here rather than there, since only the gateway publishes a document.
 */
function describeHealth(document: OpenAPIObject): void {
  const health = (summary: string, body: JsonSchema) => ({
    summary,
    security: [],
    responses: {
      200: { description: summary, content: { 'application/json': { schema: body } } },
      503: { description: 'not live or not ready (a dependency is down, or the service is stopping)', content: PROBLEM_CONTENT },
    },
  });
  for (const [path, summary, body] of [
    ['/livez', 'The process is up and its event loop turns', { type: 'object', required: ['status'], properties: { status: { const: 'ok' } } }],
    [
      '/readyz',
      'Every dependency the gateway needs answers (each check by name, ok or failed; why one failed is in the logs)',
      { type: 'object', required: ['status', 'checks'], properties: { status: { const: 'ready' }, checks: { type: 'object', additionalProperties: { enum: ['ok', 'failed', 'stopping'] } } } },
    ],
  ] as const) {
    const get = document.paths[path]?.get;
    if (get) document.paths[path].get = { ...get, ...health(summary, body), tags: ['health'] };
  }
  const metrics = document.paths['/metrics']?.get;
  if (metrics) {
    document.paths['/metrics'].get = {
      ...metrics,
      summary: "This process's Prometheus metrics (text format 0.0.4), for a scraper; no credentials, no run ids or orgs in labels",
      security: [],
      tags: ['health'],
      responses: { 200: { description: 'Prometheus text exposition format, version 0.0.4', content: { 'text/plain': { schema: { type: 'string' } } } } },
    };
  }
}

/**
 * The answers of the checks that run before any route (web-security.ts), on every operation they
 * apply to, so none can be left undocumented: a Host the gateway does not answer for is a 421 on
 * every operation but health; a write the session cookie may sign in is a 403 when another page sent it.
 */
function describeWebChecks(document: OpenAPIObject): void {
  for (const [path, item] of Object.entries(document.paths)) {
    if (HOST_CHECK_EXEMPT_PATHS.has(path)) continue;
    for (const method of ['get', 'put', 'post', 'delete', 'patch'] as const) {
      const operation = item[method];
      if (!operation) continue;
      operation.responses = { ...operation.responses, 421: problemResponse(421) };
      const cookieSigned = (operation.security ?? document.security ?? []).some((requirement) => SECURITY.session in requirement);
      if (cookieSigned && WRITE_METHODS.has(method.toUpperCase())) operation.responses = { ...operation.responses, 403: problemResponse(403) };
    }
  }
}

/** An OpenAPI link's target, by path and method (its operationId is looked up), and where its parameters come from. */
interface LinkTarget {
  path: string;
  method: 'get' | 'post';
  description: string;
  parameters: Record<string, string>;
}

/** The run a 202 started (or, for a duplicate, the run its first request started). */
const STARTED_RUN = { id: '$response.body#/run_id' };
/** The first snapshot of a run's snapshot list. */
const FIRST_SNAPSHOT = { id: '$response.body#/run_id', snapshotId: '$response.body#/items/0/snapshot_id' };

const READ_RUN: Record<string, LinkTarget> = {
  GetRun: { path: '/runs/{id}', method: 'get', description: 'the run this command started', parameters: STARTED_RUN },
  ListRunSnapshots: { path: '/runs/{id}/snapshots', method: 'get', description: "the started run's snapshots", parameters: STARTED_RUN },
};
const READ_AGENT_RUN: Record<string, LinkTarget> = {
  ...READ_RUN,
  GetRunConversation: { path: '/runs/{id}/conversation', method: 'get', description: "the started run's conversation", parameters: STARTED_RUN },
};

/**
 * Where what an operation creates is read next, as OpenAPI links on its success response: a started
 * run's id leads to the run's reads, a run's snapshot list to the first snapshot's. Clients (and a
 * stateful fuzzer) can follow them; they promise nothing a route does not already answer.
 */
const LINKS: [path: string, method: 'get' | 'post', status: string, links: Record<string, LinkTarget>][] = [
  ['/agents', 'post', '202', READ_AGENT_RUN],
  ['/runs/{id}/fork', 'post', '202', READ_AGENT_RUN],
  ['/evals', 'post', '202', { ...READ_RUN, GetRunResults: { path: '/runs/{id}/results', method: 'get', description: "the started eval's case results", parameters: STARTED_RUN } }],
  [
    '/runs/{id}/snapshots',
    'get',
    '200',
    {
      ListSnapshotFiles: { path: '/runs/{id}/snapshots/{snapshotId}/files', method: 'get', description: "the first snapshot's files", parameters: FIRST_SNAPSHOT },
      GetSnapshotArchive: { path: '/runs/{id}/snapshots/{snapshotId}/archive', method: 'get', description: "the first snapshot's archive", parameters: FIRST_SNAPSHOT },
      GetSnapshotTrajectory: { path: '/runs/{id}/snapshots/{snapshotId}/trajectory', method: 'get', description: "the first snapshot's trajectory", parameters: FIRST_SNAPSHOT },
    },
  ],
];

/** Adds LINKS to the responses they start from; a link whose operation is missing is an error, not a dangling link. */
function describeLinks(document: OpenAPIObject): void {
  for (const [path, method, status, links] of LINKS) {
    const response = document.paths[path]?.[method]?.responses?.[status] as { links?: Record<string, unknown> } | undefined;
    if (!response) throw new Error(`no ${status} response of ${method.toUpperCase()} ${path} to link from`);
    response.links = {
      ...response.links,
      ...Object.fromEntries(
        Object.entries(links).map(([name, target]) => {
          const operationId = document.paths[target.path]?.[target.method]?.operationId;
          if (!operationId) throw new Error(`link ${name}: no operation ${target.method.toUpperCase()} ${target.path}`);
          return [name, { operationId, description: target.description, parameters: target.parameters }];
        }),
      ),
    };
  }
}

/** The gateway's OpenAPI document, generated from its controllers and their decorators. */
export function buildOpenApiDocument(app: INestApplication): OpenAPIObject {
  const config = new DocumentBuilder()
    .setOpenAPIVersion('3.1.0')
    .setTitle('AgentRun gateway')
    .setVersion('1')
    .setDescription(
      'Start and steer agent and evaluation runs, read them, and follow their events. Every error is `application/problem+json`. ' +
        'A method a path does not support is a 405 with an `Allow` header.',
    )
    .addBearerAuth({ type: 'http', scheme: 'bearer', description: 'an API token (`ar_...`), made with `npm run token -- create --org ORG`' }, SECURITY.bearer)
    .addCookieAuth(SESSION_COOKIE, { type: 'apiKey', in: 'cookie', description: `the session cookie POST /session sets: an opaque session id (not the token) with idle and absolute expiry, revoked by DELETE /session; named ${SECURE_SESSION_COOKIE} over https` }, SECURITY.session)
    .addApiKey(
      { type: 'apiKey', in: 'header', name: 'X-Org', description: 'local mode only, and only without a valid token: names the org, unauthenticated (must match the org pattern). Production ignores it.' },
      SECURITY.org,
    )
    .build();
  const document = SwaggerModule.createDocument(app, config);
  document.components = { ...document.components, schemas: { ...document.components?.schemas, ...(API_SCHEMAS as NonNullable<OpenAPIObject['components']>['schemas']) } };
  describeHealth(document);
  describeWebChecks(document);
  describeLinks(document);
  return document;
}

/** Builds the document from the assembled app and hands it to the docs routes. */
export function publishOpenApiDocument(app: INestApplication): OpenAPIObject {
  const document = buildOpenApiDocument(app);
  app.get(ApiDocument).publish(document);
  return document;
}
