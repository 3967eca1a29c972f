import { optionalStr, secret, str, type Env } from './env';

/**
 * The model endpoints an eval may name. `default` is `MODEL_BASE_URL` with `MODEL_API_KEY`; more come from
 * `AGENTRUN_MODEL_ENDPOINTS`, a JSON object `{"<name>": {"base_url": "...", "api_key_secret": "<SECRET>"}}`.
 * A command names an endpoint, never a URL or a key: the workers hold both, so a command cannot point a
 * worker at an address of its choosing or read a key out of it.
 */
/** The endpoint names alone: the services that start evals check a command's `model_endpoint` against them. */
export const modelEndpointNamesSpec = { AGENTRUN_MODEL_ENDPOINTS: optionalStr() };

/** What the eval workers read: the endpoints with their addresses, and the default one's key. */
export const modelEndpointSpec = {
  ...modelEndpointNamesSpec,
  MODEL_BASE_URL: str('http://127.0.0.1:8090/v1'),
  MODEL_API_KEY: secret(),
};

export const ENDPOINT_NAME_PATTERN = '^[a-z0-9][a-z0-9_-]{0,62}$';
const endpointNameRe = new RegExp(ENDPOINT_NAME_PATTERN);
const secretNameRe = /^[A-Z][A-Z0-9_]{0,62}$/;

export interface ModelEndpoint {
  name: string;
  base_url: string;
  /** The secret holding the key: `AGENTRUN_SECRET_<NAME>` (or `AGENTRUN_SECRET_<NAME>_FILE`) in the worker's environment. */
  api_key_secret?: string;
}

/** The configured endpoints by name; a malformed `AGENTRUN_MODEL_ENDPOINTS` is a configuration error at start. */
export function modelEndpointsOf(config: { MODEL_BASE_URL: string; AGENTRUN_MODEL_ENDPOINTS?: string }): Record<string, ModelEndpoint> {
  const endpoints: Record<string, ModelEndpoint> = { default: { name: 'default', base_url: config.MODEL_BASE_URL } };
  if (!config.AGENTRUN_MODEL_ENDPOINTS) return endpoints;
  let parsed: unknown;
  try {
    parsed = JSON.parse(config.AGENTRUN_MODEL_ENDPOINTS);
  } catch (err) {
    throw new Error(`AGENTRUN_MODEL_ENDPOINTS is not JSON: ${(err as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('AGENTRUN_MODEL_ENDPOINTS must be a JSON object of endpoints by name');
  for (const [name, value] of Object.entries(parsed as Record<string, unknown>)) {
    const where = `AGENTRUN_MODEL_ENDPOINTS.${name}`;
    if (!endpointNameRe.test(name)) throw new Error(`${where}: an endpoint name must match ${ENDPOINT_NAME_PATTERN}`);
    const v = value as { base_url?: unknown; api_key_secret?: unknown } | null;
    if (typeof v !== 'object' || v === null) throw new Error(`${where} must be an object with base_url`);
    if (typeof v.base_url !== 'string' || !/^https?:\/\/\S+$/.test(v.base_url)) throw new Error(`${where}.base_url must be an http(s) URL`);
    if (v.api_key_secret !== undefined && (typeof v.api_key_secret !== 'string' || !secretNameRe.test(v.api_key_secret))) {
      throw new Error(`${where}.api_key_secret must be a secret name like OPENAI_KEY`);
    }
    endpoints[name] = { name, base_url: v.base_url, ...(typeof v.api_key_secret === 'string' ? { api_key_secret: v.api_key_secret } : {}) };
  }
  return endpoints;
}

/** A named secret's value from `AGENTRUN_SECRET_<NAME>` or the file `AGENTRUN_SECRET_<NAME>_FILE`; undefined when neither is set. */
export function readNamedSecret(name: string, env: Env = process.env): string | undefined {
  if (!secretNameRe.test(name)) throw new Error(`'${name}' is not a secret name`);
  return secret().read(env, `AGENTRUN_SECRET_${name}`);
}

/** The endpoint names alone, for processes that check a command's `model_endpoint` (the workers hold the URLs and keys). */
export function modelEndpointNames(setting: string | undefined): string[] {
  return Object.keys(modelEndpointsOf({ MODEL_BASE_URL: 'http://checked-by-the-workers', AGENTRUN_MODEL_ENDPOINTS: setting }));
}
