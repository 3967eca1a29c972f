import { readFileSync } from 'node:fs';
import { SEARCH_ATTRIBUTES, type SearchAttributeType } from '@agentrun/contracts';
import type { TemporalConfig } from '@agentrun/config';
import { Connection, type ConnectionOptions } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';

/** The TLS part of the SDK's connection options (the same shape for the client and the workers). */
export type TemporalTls = Exclude<NonNullable<ConnectionOptions['tls']>, boolean>;

/**
 * One connection config for the client (`Connection.connect`) and the workers
 * (`NativeConnection.connect`): both take exactly these fields.
 */
export interface TemporalConnectionOptions {
  address: string;
  namespace: string;
  /** Undefined: plaintext. `{}`: TLS trusting the system's roots. */
  tls?: TemporalTls;
  apiKey?: string;
  metadata?: Record<string, string>;
}

/** A Temporal setting that cannot work, or a server that cannot be used: the message says which and what to do. */
export class TemporalStartupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TemporalStartupError';
    // The message is the whole story; a stack trace would bury it in the service's start log.
    this.stack = `${this.name}: ${message}`;
  }
}

/** How long connecting and the startup check may take before the service gives up. */
export const TEMPORAL_STARTUP_TIMEOUT_MS = 15_000;

type FileReader = (path: string) => Buffer;

/**
 * Maps the settings to the SDK's options, reading each certificate and key once. An API key means
 * TLS (Temporal Cloud only accepts it over TLS) and carries the namespace as `temporal-namespace`
 * metadata, which Cloud's API-key endpoints route by.
 */
export function temporalConnectionOptions(config: TemporalConfig, read: FileReader = readFileSync): TemporalConnectionOptions {
  const ca = config.TEMPORAL_TLS_SERVER_CA_CERT_PATH;
  const crt = config.TEMPORAL_TLS_CLIENT_CERT_PATH;
  const key = config.TEMPORAL_TLS_CLIENT_KEY_PATH;
  const serverName = config.TEMPORAL_TLS_SERVER_NAME;
  const apiKey = config.TEMPORAL_API_KEY;
  if ((crt === undefined) !== (key === undefined))
    throw new TemporalStartupError('TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH go together: set both for mTLS, or neither');
  const tlsSettings = [ca && 'TEMPORAL_TLS_SERVER_CA_CERT_PATH', crt && 'TEMPORAL_TLS_CLIENT_CERT_PATH', serverName && 'TEMPORAL_TLS_SERVER_NAME'].filter(
    (s): s is string => Boolean(s),
  );
  if (config.TEMPORAL_TLS === false && tlsSettings.length)
    throw new TemporalStartupError(`TEMPORAL_TLS=false contradicts ${tlsSettings.join(', ')}: remove one or the other`);
  const tlsOn = config.TEMPORAL_TLS ?? (tlsSettings.length > 0 || apiKey !== undefined);

  const options: TemporalConnectionOptions = { address: config.TEMPORAL_ADDRESS, namespace: config.TEMPORAL_NAMESPACE };
  if (tlsOn) {
    const tls: TemporalTls = {};
    if (ca) tls.serverRootCACertificate = readSetting(read, 'TEMPORAL_TLS_SERVER_CA_CERT_PATH', ca);
    if (crt && key)
      tls.clientCertPair = { crt: readSetting(read, 'TEMPORAL_TLS_CLIENT_CERT_PATH', crt), key: readSetting(read, 'TEMPORAL_TLS_CLIENT_KEY_PATH', key) };
    if (serverName) tls.serverNameOverride = serverName;
    options.tls = tls;
  }
  if (apiKey !== undefined) {
    options.apiKey = apiKey;
    options.metadata = { 'temporal-namespace': config.TEMPORAL_NAMESPACE };
  }
  return options;
}

function readSetting(read: FileReader, setting: string, path: string): Buffer {
  try {
    return read(path);
  } catch (err) {
    throw new TemporalStartupError(`${setting}: cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

/** What a failed connection most likely needs: the settings in play, named. */
function describeSettings(options: TemporalConnectionOptions): string {
  const parts = ['TEMPORAL_ADDRESS'];
  if (options.tls) {
    parts.push('TEMPORAL_TLS');
    if (options.tls.serverRootCACertificate) parts.push('TEMPORAL_TLS_SERVER_CA_CERT_PATH');
    if (options.tls.clientCertPair) parts.push('TEMPORAL_TLS_CLIENT_CERT_PATH/TEMPORAL_TLS_CLIENT_KEY_PATH');
    if (options.tls.serverNameOverride) parts.push('TEMPORAL_TLS_SERVER_NAME');
  }
  if (options.apiKey !== undefined) parts.push('TEMPORAL_API_KEY');
  return parts.join(', ');
}

function connectionFailure(options: TemporalConnectionOptions, err: unknown): TemporalStartupError {
  const how = options.tls ? 'over TLS' : 'in plaintext';
  return new TemporalStartupError(
    `cannot connect to Temporal at ${options.address} ${how}: ${(err as Error).message ?? String(err)}; check ${describeSettings(options)}`,
  );
}

async function within<T>(ms: number, work: Promise<T>, onLate: (value: T) => void, timeoutError: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  let late = false;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      late = true;
      reject(timeoutError());
    }, ms);
  });
  // A connection that arrives after the deadline is closed, not leaked.
  work.then((value) => late && onLate(value), () => undefined);
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** The fields both SDK connections take (the namespace goes to the client and the workers instead). */
function sdkOptions(options: TemporalConnectionOptions): Omit<TemporalConnectionOptions, 'namespace'> {
  const { address, tls, apiKey, metadata } = options;
  return { address, ...(tls && { tls }), ...(apiKey !== undefined && { apiKey }), ...(metadata && { metadata }) };
}

/** The client's connection, or one clear error within the startup timeout. */
export async function connectTemporalClient(options: TemporalConnectionOptions, timeoutMs = TEMPORAL_STARTUP_TIMEOUT_MS): Promise<Connection> {
  try {
    return await within(
      timeoutMs,
      Connection.connect({ ...sdkOptions(options), connectTimeout: timeoutMs }),
      (c) => void c.close().catch(() => undefined),
      () => new Error(`no answer within ${timeoutMs} ms`),
    );
  } catch (err) {
    throw connectionFailure(options, err);
  }
}

/** The workers' native connection, or one clear error within the startup timeout. */
export async function connectTemporalWorker(options: TemporalConnectionOptions, timeoutMs = TEMPORAL_STARTUP_TIMEOUT_MS): Promise<NativeConnection> {
  try {
    return await within(
      timeoutMs,
      NativeConnection.connect(sdkOptions(options)),
      (c) => void c.close().catch(() => undefined),
      () => new Error(`no answer within ${timeoutMs} ms`),
    );
  } catch (err) {
    throw connectionFailure(options, err);
  }
}

/** Indexed value types as the server's API numbers them. */
const INDEXED_VALUE_TYPES: Record<SearchAttributeType, number> = {
  Text: 1,
  Keyword: 2,
  Int: 3,
  Double: 4,
  Bool: 5,
  Datetime: 6,
  KeywordList: 7,
};
const TYPE_NAMES = Object.fromEntries(Object.entries(INDEXED_VALUE_TYPES).map(([name, n]) => [n, name])) as Record<number, SearchAttributeType>;

export interface SearchAttributeProblem {
  name: string;
  type: SearchAttributeType;
  /** Set when the namespace has the name with another type. */
  actual?: string;
}

/** The attributes the workflows set that the namespace lacks or has with another type. */
export function searchAttributeProblems(
  present: Record<string, number>,
  required: Record<string, SearchAttributeType> = SEARCH_ATTRIBUTES,
): SearchAttributeProblem[] {
  const problems: SearchAttributeProblem[] = [];
  for (const [name, type] of Object.entries(required)) {
    const actual = present[name];
    if (actual === undefined) problems.push({ name, type });
    else if (actual !== INDEXED_VALUE_TYPES[type]) problems.push({ name, type, actual: TYPE_NAMES[actual] ?? `type ${actual}` });
  }
  return problems;
}

/**
 * The commands that create the missing attributes: the CLI for any cluster, one command per attribute
 * (the CLI takes several `--name`s but creates only the first), and tcld for a Temporal Cloud address.
 */
export function searchAttributeCommands(namespace: string, missing: SearchAttributeProblem[], address: string): string[] {
  const commands = missing.map((m) => `temporal operator search-attribute create --address ${address} --namespace ${namespace} --name ${m.name} --type ${m.type}`);
  if (/\.tmprl\.cloud(:\d+)?$/.test(address))
    commands.push(`tcld namespace search-attributes add --namespace ${namespace} ${missing.map((m) => `--search-attribute ${m.name}=${m.type}`).join(' ')}`);
  return commands;
}

/** What the check needs of a connection: both the client's and the workers' have it. */
export interface TemporalServices {
  workflowService: Pick<Connection['workflowService'], 'describeNamespace'>;
  operatorService: Pick<Connection['operatorService'], 'listSearchAttributes'>;
  withDeadline<R>(deadline: number | Date, fn: () => Promise<R>): Promise<R>;
}

const GRPC_NOT_FOUND = 5;
const GRPC_PERMISSION_DENIED = 7;
const GRPC_UNAUTHENTICATED = 16;

/**
 * Checks that the namespace exists, takes this client's credentials, and has every search attribute
 * the workflows set (none are listed when `required` is empty), with its type. Without them workflow
 * tasks fail at the first upsert, long after the service reported ready.
 */
export async function checkTemporalNamespace(
  services: TemporalServices,
  options: Pick<TemporalConnectionOptions, 'address' | 'namespace' | 'apiKey' | 'tls'>,
  required: Record<string, SearchAttributeType> = SEARCH_ATTRIBUTES,
  timeoutMs = TEMPORAL_STARTUP_TIMEOUT_MS,
): Promise<void> {
  const { address, namespace } = options;
  const deadline = Date.now() + timeoutMs;
  let present: Record<string, number>;
  try {
    await services.withDeadline(deadline, () => services.workflowService.describeNamespace({ namespace }));
    if (!Object.keys(required).length) return;
    const listed = await services.withDeadline(deadline, () => services.operatorService.listSearchAttributes({ namespace }));
    present = (listed.customAttributes ?? {}) as Record<string, number>;
  } catch (err) {
    const code = (err as { code?: number }).code;
    if (code === GRPC_NOT_FOUND)
      throw new TemporalStartupError(
        `Temporal namespace '${namespace}' does not exist at ${address} (TEMPORAL_NAMESPACE): create it with \`temporal operator namespace create --address ${address} --namespace ${namespace}\``,
      );
    if (code === GRPC_UNAUTHENTICATED || code === GRPC_PERMISSION_DENIED)
      throw new TemporalStartupError(
        `Temporal at ${address} refused this client for namespace '${namespace}': ${(err as Error).message}; check ${options.apiKey !== undefined ? 'TEMPORAL_API_KEY' : 'TEMPORAL_TLS_CLIENT_CERT_PATH/TEMPORAL_TLS_CLIENT_KEY_PATH'} and TEMPORAL_NAMESPACE`,
      );
    throw new TemporalStartupError(`cannot check Temporal namespace '${namespace}' at ${address}: ${(err as Error).message}; check TEMPORAL_ADDRESS and the TLS settings`);
  }
  const problems = searchAttributeProblems(present, required);
  if (!problems.length) return;
  const missing = problems.filter((p) => p.actual === undefined);
  const wrong = problems.filter((p) => p.actual !== undefined);
  const lines = [`Temporal namespace '${namespace}' at ${address} lacks search attributes the workflows set:`];
  if (missing.length) lines.push(`  missing: ${missing.map((p) => `${p.name} (${p.type})`).join(', ')}`);
  if (wrong.length) lines.push(`  wrong type: ${wrong.map((p) => `${p.name} is ${p.actual}, needs ${p.type}`).join(', ')} (a type cannot change: remove and recreate it)`);
  if (missing.length) lines.push('create them with:', ...searchAttributeCommands(namespace, missing, address).map((c) => `  ${c}`));
  lines.push('(TEMPORAL_CHECK_SEARCH_ATTRIBUTES=false skips this check)');
  throw new TemporalStartupError(lines.join('\n'));
}

/** Whether this process has already checked its namespace (a service with a client and workers checks once). */
const namespaceChecks = new Map<string, Promise<void>>();

/**
 * Checks the namespace once per process: that it exists and takes these credentials always, its search
 * attributes unless TEMPORAL_CHECK_SEARCH_ATTRIBUTES=false.
 */
export function checkNamespaceOnce(config: Pick<TemporalConfig, 'TEMPORAL_CHECK_SEARCH_ATTRIBUTES'>, services: TemporalServices, options: TemporalConnectionOptions): Promise<void> {
  const key = `${options.address}/${options.namespace}`;
  let check = namespaceChecks.get(key);
  if (!check) {
    check = checkTemporalNamespace(services, options, config.TEMPORAL_CHECK_SEARCH_ATTRIBUTES ? SEARCH_ATTRIBUTES : {});
    check.catch(() => namespaceChecks.delete(key));
    namespaceChecks.set(key, check);
  }
  return check;
}
