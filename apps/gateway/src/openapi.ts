import { COMMAND_PAYLOAD_SCHEMAS, RUN_EVENT_SCHEMA, RUN_ID_PATTERN, RUN_KINDS, RUN_STATUSES } from '@agentrun/contracts';

const problem = { description: 'problem details', content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } } };
const org = {
  name: 'X-Org',
  in: 'header',
  required: false,
  description: 'the org, local mode only and only without a valid token; production ignores it and takes the org from the API token',
  schema: { type: 'string' },
};
const idempotency = { name: 'Idempotency-Key', in: 'header', required: false, description: 'becomes the command id', schema: { type: 'string', maxLength: 128 } };
const runId = { name: 'id', in: 'path', required: true, schema: { type: 'string', pattern: RUN_ID_PATTERN } };
const accepted = { description: 'accepted', content: { 'application/json': { schema: { $ref: '#/components/schemas/Accepted' } } } };

function control(summary: string, type: keyof typeof COMMAND_PAYLOAD_SCHEMAS) {
  return {
    post: {
      summary,
      parameters: [org, idempotency, runId],
      requestBody: { required: false, content: { 'application/json': { schema: COMMAND_PAYLOAD_SCHEMAS[type] } } },
      responses: { 202: accepted, 400: problem, 401: problem, 404: problem, 409: problem, 422: problem, 503: problem },
    },
  };
}

function start(summary: string, type: 'agent.start' | 'eval.start') {
  return {
    post: {
      summary,
      parameters: [org, idempotency],
      requestBody: {
        required: true,
        content: {
          'application/json': {
            schema: { allOf: [COMMAND_PAYLOAD_SCHEMAS[type]], properties: { run_id: { type: 'string', pattern: RUN_ID_PATTERN } } },
          },
        },
      },
      responses: { 202: accepted, 400: problem, 401: problem, 409: problem, 413: problem, 503: problem },
    },
  };
}

/** The OpenAPI document served at /docs, built from the contracts' schemas. */
export const OPENAPI_DOCUMENT = {
  openapi: '3.1.0',
  info: { title: 'AgentRun gateway', version: '1' },
  paths: {
    '/agents': start('Start an agent run', 'agent.start'),
    '/evals': start('Start an evaluation run', 'eval.start'),
    '/runs': {
      get: {
        summary: "The org's runs, newest first",
        parameters: [
          org,
          { name: 'kind', in: 'query', schema: { enum: RUN_KINDS } },
          { name: 'status', in: 'query', schema: { enum: RUN_STATUSES } },
          { name: 'model', in: 'query', schema: { type: 'string' } },
          { name: 'cursor', in: 'query', schema: { type: 'string' } },
          { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 200, default: 20 } },
        ],
        responses: { 200: { description: 'a page of runs and the cursor of the next' }, 400: problem, 401: problem },
      },
    },
    '/runs/{id}': { get: { summary: 'A run, its latest state and its last events', parameters: [org, runId], responses: { 200: { description: 'the run' }, 401: problem, 404: problem } } },
    '/runs/{id}/events': {
      get: {
        summary: "The run's events as server-sent events",
        parameters: [
          org,
          runId,
          { name: 'after', in: 'query', schema: { type: 'integer', minimum: 0 } },
          { name: 'Last-Event-ID', in: 'header', schema: { type: 'integer', minimum: 0 } },
        ],
        responses: { 200: { description: 'text/event-stream: id = seq, event = type, data = the run event; `end` after a terminal status' }, 404: problem },
      },
    },
    '/runs/{id}/pause': control('Pause an agent run', 'agent.pause'),
    '/runs/{id}/resume': control('Resume an agent run', 'agent.resume'),
    '/runs/{id}/cancel': control('Cancel a run (agent or eval)', 'agent.cancel'),
    '/runs/{id}/approve': control('Approve an eval run awaiting review (a listed reviewer; 422 otherwise)', 'eval.approve'),
    '/runs/{id}/retry-failed': control('Start {id}-retry-{n} over the failed and ungraded cases (409 when none or still running)', 'eval.retry_failed'),
    '/runs/{id}/inject-context': control('Add context to an agent run', 'agent.inject_context'),
    '/runs/{id}/change-goal': control("Change an agent run's goal", 'agent.change_goal'),
    '/session': {
      post: {
        summary: 'Trade an API token for a session cookie',
        description:
          'Takes the token from `Authorization: Bearer` or the body, checks it, and sets `agentrun_session` (HttpOnly, SameSite=Strict, Path=/, Secure over https). The cookie then authenticates like the bearer header, including the SSE route; revoking the token ends the session.',
        security: [{ bearer: [] }, {}],
        requestBody: {
          required: false,
          content: { 'application/json': { schema: { type: 'object', properties: { token: { type: 'string' } }, additionalProperties: false } } },
        },
        responses: {
          204: { description: 'signed in; `Set-Cookie: agentrun_session=...`', headers: { 'Set-Cookie': { schema: { type: 'string' } } } },
          400: problem,
          401: problem,
        },
      },
      delete: {
        summary: 'Clear the session cookie',
        security: [],
        responses: { 204: { description: 'signed out; the cookie is cleared', headers: { 'Set-Cookie': { schema: { type: 'string' } } } } },
      },
    },
  },
  security: [{ bearer: [] }, { session: [] }],
  components: {
    securitySchemes: {
      bearer: { type: 'http', scheme: 'bearer', description: 'an API token (`ar_...`), made with `npm run token -- create --org ORG`' },
      session: { type: 'apiKey', in: 'cookie', name: 'agentrun_session', description: 'set by POST /session' },
    },
    schemas: {
      Problem: {
        type: 'object',
        required: ['type', 'title', 'status', 'detail'],
        properties: { type: { type: 'string' }, title: { type: 'string' }, status: { type: 'integer' }, detail: { type: 'string' } },
      },
      Accepted: {
        type: 'object',
        required: ['command_id', 'run_id', 'outcome'],
        properties: { command_id: { type: 'string' }, run_id: { type: 'string' }, outcome: { enum: ['accepted', 'duplicate'] }, message: { type: 'string' } },
      },
      RunEvent: RUN_EVENT_SCHEMA,
    },
  },
};
