import type { INestApplication } from '@nestjs/common';
import { DocumentBuilder, SwaggerModule, type OpenAPIObject } from '@nestjs/swagger';
import { CAPTURE_STATUSES, OUTCOMES, RUN_EVENT_SCHEMA, RUN_ID_PATTERN, RUN_KINDS, RUN_STATUSES, SNAPSHOT_ID_PATTERN } from '@agentrun/contracts';
import { embeddable, PROBLEM_CONTENT, SECURITY, type JsonSchema } from './api-docs';
import { ApiDocument } from './docs.controller';
import { SESSION_COOKIE } from './org';

const nullableString = { type: ['string', 'null'] };

/** The shapes the gateway answers with, named in the document's components. */
export const API_SCHEMAS: Record<string, JsonSchema> = {
  Problem: {
    type: 'object',
    description: 'an RFC 9457 problem document; command refusals add `reason` and `command_id`',
    required: ['type', 'title', 'status', 'detail'],
    properties: {
      type: { type: 'string' },
      title: { type: 'string' },
      status: { type: 'integer', minimum: 400, maximum: 599 },
      detail: { type: 'string' },
      reason: { type: 'string' },
      command_id: { type: 'string' },
    },
  },
  Accepted: {
    type: 'object',
    required: ['command_id', 'run_id', 'outcome'],
    properties: {
      command_id: { type: 'string' },
      run_id: { type: 'string', pattern: RUN_ID_PATTERN },
      outcome: { enum: OUTCOMES.filter((o) => o !== 'rejected') },
      message: { type: 'string' },
    },
  },
  RunSummary: {
    type: 'object',
    required: ['run_id', 'kind', 'status', 'model', 'parent_run_id', 'created_at', 'updated_at', 'last_seq', 'state'],
    properties: {
      run_id: { type: 'string', pattern: RUN_ID_PATTERN },
      kind: { enum: [...RUN_KINDS] },
      status: { enum: [...RUN_STATUSES] },
      model: nullableString,
      parent_run_id: nullableString,
      created_at: { type: 'string', format: 'date-time' },
      updated_at: { type: 'string', format: 'date-time' },
      last_seq: { type: 'integer', minimum: 0 },
      state: { type: 'object' },
    },
  },
  RunPage: {
    type: 'object',
    required: ['runs', 'next_cursor'],
    properties: {
      runs: { type: 'array', items: { $ref: '#/components/schemas/RunSummary' } },
      next_cursor: { ...nullableString, description: 'pass as `cursor` for the next page; null on the last' },
    },
  },
  RunDetail: {
    allOf: [
      { $ref: '#/components/schemas/RunSummary' },
      { type: 'object', required: ['last_events'], properties: { last_events: { type: 'array', items: { $ref: '#/components/schemas/RunEvent' } } } },
    ],
  },
  RunEvent: embeddable(RUN_EVENT_SCHEMA),
  SnapshotRow: {
    type: 'object',
    required: ['snapshot_id', 'source_agent_name', 'source_context_id', 'elapsed_s', 'captured_at_utc', 'is_final', 'capture_status', 'step'],
    properties: {
      snapshot_id: { type: 'string', pattern: SNAPSHOT_ID_PATTERN },
      turn: { type: 'integer', minimum: 1 },
      id: { type: 'string' },
      version: { type: 'integer' },
      bundle_object_url: { type: 'string' },
      bytes: { type: 'integer', minimum: 0 },
      source_agent_name: { type: 'string' },
      source_context_id: { type: 'string' },
      elapsed_s: { type: 'number' },
      captured_at_utc: { type: 'string' },
      is_final: { type: 'boolean' },
      capture_status: { enum: [...CAPTURE_STATUSES] },
      capture_reason: { type: 'string' },
      trajectory_s3_uri: { type: 'string' },
      env_universe_id: { type: 'string' },
      env_universe_version: { type: 'integer' },
      step: { type: 'integer', minimum: 0 },
    },
  },
  SnapshotList: {
    type: 'object',
    required: ['run_id', 'items'],
    properties: { run_id: { type: 'string', pattern: RUN_ID_PATTERN }, items: { type: 'array', items: { $ref: '#/components/schemas/SnapshotRow' } } },
  },
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
      'Every dependency the gateway needs answers',
      { type: 'object', required: ['status', 'checks'], properties: { status: { const: 'ready' }, checks: { type: 'object', additionalProperties: { type: 'string' } } } },
    ],
  ] as const) {
    const get = document.paths[path]?.get;
    if (get) document.paths[path].get = { ...get, ...health(summary, body), tags: ['health'] };
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
    .addCookieAuth(SESSION_COOKIE, { type: 'apiKey', in: 'cookie', description: 'the session cookie POST /session sets; it authenticates like the token' }, SECURITY.session)
    .addApiKey(
      { type: 'apiKey', in: 'header', name: 'X-Org', description: 'local mode only, and only without a valid token: names the org, unauthenticated (must match the org pattern). Production ignores it.' },
      SECURITY.org,
    )
    .build();
  const document = SwaggerModule.createDocument(app, config);
  document.components = { ...document.components, schemas: { ...document.components?.schemas, ...(API_SCHEMAS as NonNullable<OpenAPIObject['components']>['schemas']) } };
  describeHealth(document);
  return document;
}

/** Builds the document from the assembled app and hands it to the docs routes. */
export function publishOpenApiDocument(app: INestApplication): OpenAPIObject {
  const document = buildOpenApiDocument(app);
  app.get(ApiDocument).publish(document);
  return document;
}
