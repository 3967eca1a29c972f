import { applyDecorators } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiCookieAuth, ApiHeader, ApiParam, ApiResponse, ApiSecurity } from '@nestjs/swagger';
import { COMMAND_ID_PATTERN, COMMAND_PAYLOAD_SCHEMAS, ORG_PATTERN, plainSchema, RUN_ID_PATTERN, SNAPSHOT_ID_PATTERN, type CommandType } from '@agentrun/contracts';
import { CAPTURE_CHECKED_COMMANDS } from '@agentrun/contracts/validation';

/*
 * Decorators that describe the gateway's operations in its OpenAPI document. The schemas come from
 * the contracts the gateway validates with, so the document promises exactly what is enforced.
 */

/** A JSON Schema as the document embeds it. */
export type JsonSchema = Record<string, unknown>;

/** The names the document's security schemes go by. */
export const SECURITY = { bearer: 'bearer', session: 'session', org: 'org' } as const;

const PROBLEM_WHY: Record<number, string> = {
  400: 'the request is malformed: a bad path parameter, query, header or body (the detail names the field)',
  401: 'no usable credentials: no token or X-Org (local mode), an unknown or revoked token, or a session that has ended (signed out, expired, or its token revoked)',
  403: "a write signed in by the session cookie alone that does not come from the gateway's own pages (its Origin is another, or it has neither Origin nor Sec-Fetch-Site: same-origin); an approval by a token without a subject, or naming a reviewer other than the token's subject",
  404: 'no such run, snapshot, archive or trajectory in this org',
  409: 'the run is in a state that refuses this command (closed, exists, wrong kind, still active)',
  410: 'the archive or trajectory was captured but is no longer (whole) in the object store',
  413: 'the request body is over the size limit, or a snapshot file asked for is over SNAPSHOT_FILE_MAX_BYTES (the detail gives its size)',
  415: 'the request body has a charset or encoding JSON cannot have',
  421: 'the Host header names a host this gateway does not answer for (GATEWAY_ALLOWED_HOSTS; in local mode also localhost, 127.0.0.1, [::1])',
  422: 'the workflow refused the command (e.g. a reviewer not listed, a goal change it rejects)',
  429: "over one of the org's quotas (AGENTRUN_QUOTAS): active runs, max_steps or snapshots per run at a start, open streams on a stream; the detail names the limit",
  501: 'the command is not supported for this run',
  503: 'a dependency did not answer, or a stream found the gateway at its own limit (GATEWAY_SSE_MAX_STREAMS); retry (after Retry-After), with the same Idempotency-Key for commands',
};

/** Where a problem document lives: every error leaves the gateway as `application/problem+json`. */
export const PROBLEM_CONTENT = { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } };

/** One problem answer as the document lists it. */
export function problemResponse(status: number): { description: string; content: typeof PROBLEM_CONTENT } {
  return { description: PROBLEM_WHY[status] ?? 'a problem', content: PROBLEM_CONTENT };
}

/** The statuses an operation answers with a problem document. */
export function ApiProblems(...statuses: number[]): MethodDecorator & ClassDecorator {
  return applyDecorators(...statuses.map((status) => ApiResponse({ status, ...problemResponse(status) })));
}

/** A JSON body answered with `status`. */
export function ApiJson(status: number, description: string, schema: JsonSchema): MethodDecorator & ClassDecorator {
  return ApiResponse({ status, description, content: { 'application/json': { schema } } });
}

/** A path parameter holding a snapshot id (`snap-0001`). */
export function ApiSnapshotIdParam(name = 'snapshotId', description = 'the snapshot id'): MethodDecorator {
  return ApiParam({ name, required: true, description, schema: { type: 'string', pattern: SNAPSHOT_ID_PATTERN } });
}

/** A path parameter holding a run id (or a snapshot id, which has the same shape). */
export function ApiRunIdParam(name = 'id', description = 'the run id'): MethodDecorator {
  return ApiParam({ name, required: true, description, schema: { type: 'string', pattern: RUN_ID_PATTERN } });
}

/**
 * Routes behind the org guard: a token (bearer header or session cookie) names the org, or, in local
 * mode only, the X-Org header. A malformed X-Org is a 400; no credentials a 401.
 */
export function ApiOrgScoped(): ClassDecorator & MethodDecorator {
  return applyDecorators(ApiBearerAuth(SECURITY.bearer), ApiCookieAuth(SECURITY.session), ApiSecurity(SECURITY.org), ApiProblems(400, 401));
}

export function ApiIdempotencyKey(): MethodDecorator {
  return ApiHeader({
    name: 'Idempotency-Key',
    required: false,
    description: 'becomes the command id: a retried request with the same key is the same command (answered `duplicate`)',
    schema: { type: 'string', pattern: COMMAND_ID_PATTERN },
  });
}

/** The contracts' schemas carry an `$id` for their own registry; inside the document it would rebase references. */
export function embeddable(schema: object): JsonSchema {
  const copy = plainSchema(schema) as JsonSchema;
  delete copy.$id;
  return copy;
}

/**
 * Text the gateway refuses before it reaches Postgres although it satisfies the payload schema: NUL,
 * which no column can store. Every free-text string of a body says so, so a client's generator
 * never produces a request the gateway turns away.
 */
const NO_NUL = '^[^\\u0000]*$';

function withoutNul(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(withoutNul);
  if (typeof schema !== 'object' || schema === null) return schema;
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(schema)) out[key] = key === 'enum' || key === 'const' ? value : withoutNul(value);
  if (out.type !== 'string' || out.format !== undefined || out.enum !== undefined) return out;
  // Ids have patterns of their own that already exclude it.
  if (out.pattern === undefined) return { ...out, pattern: NO_NUL };
  if ([RUN_ID_PATTERN, ORG_PATTERN, COMMAND_ID_PATTERN].includes(out.pattern as string)) return out;
  const { pattern, ...rest } = out;
  return { ...rest, allOf: [{ pattern }, { pattern: NO_NUL }] };
}

/**
 * The one rule of a snapshot series a schema of its fields cannot state on its own: without a final
 * capture, an interval or per-turn captures are needed, or the series never captures (a 400).
 */
const SNAPSHOTS_CAN_CAPTURE: JsonSchema = {
  anyOf: [
    { not: { required: ['at_end'], properties: { at_end: { const: false } } } },
    { required: ['interval_seconds'], properties: { interval_seconds: { exclusiveMinimum: 0 } } },
    { required: ['per_turn'], properties: { per_turn: { const: true } } },
  ],
};

/**
 * A command's payload schema as an HTTP body: the contracts' schema, plus what the gateway adds.
 * `requiredProperties` are properties the command needs although its payload schema leaves them
 * optional (checked by the handler), documented as required with their own schema.
 */
export function commandBodySchema(type: CommandType, extraProperties: Record<string, JsonSchema> = {}, requiredProperties: Record<string, JsonSchema> = {}): JsonSchema {
  const schema = withoutNul(embeddable(COMMAND_PAYLOAD_SCHEMAS[type])) as JsonSchema;
  const properties = { ...(schema.properties as Record<string, JsonSchema> | undefined) };
  // Only where the gateway checks it: an eval's cases always take their final capture.
  if (properties.snapshots && CAPTURE_CHECKED_COMMANDS.includes(type)) properties.snapshots = { ...properties.snapshots, ...SNAPSHOTS_CAN_CAPTURE };
  // The route reads these itself (taking them out of the payload, or setting them from the path),
  // so they are optional properties of the body even where the payload schema requires or forbids them.
  const required = [...((schema.required as string[] | undefined) ?? []).filter((name) => !(name in extraProperties)), ...Object.keys(requiredProperties)];
  const rest = Object.fromEntries(Object.entries(schema).filter(([key]) => key !== 'required'));
  return { ...rest, ...(required.length ? { required } : {}), properties: { ...properties, ...extraProperties, ...requiredProperties } };
}

/** The request body of a command route: required when the payload has required fields, optional (as `{}`) otherwise. */
export function ApiCommandBody(type: CommandType, extraProperties: Record<string, JsonSchema> = {}, requiredProperties: Record<string, JsonSchema> = {}): MethodDecorator {
  const schema = commandBodySchema(type, extraProperties, requiredProperties);
  return ApiBody({ required: ((schema.required as string[] | undefined) ?? []).length > 0, schema });
}
