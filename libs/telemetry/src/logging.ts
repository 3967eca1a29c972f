/**
 * Logs: one JSON line per record (pino), or the same record as a human-readable line. Every line has
 * `time`, `level`, `service`, `context` (the Nest logger's name) and `msg`; an error adds `err` with its
 * stack; a line written while work about a run is in progress adds `org`, `run_id`, `command_id` (from
 * the AsyncLocalStorage context `withLogContext` sets) and `trace_id` (the active OpenTelemetry span's,
 * when there is one). Secrets named by the usual keys are redacted, and bearer tokens and URL passwords
 * are cut out of messages and stacks.
 *
 * Nest's `new Logger(name)` call sites stay as they are: `installLogging` makes this the logger every
 * Nest `Logger` writes to (and runService hands it to Nest).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { Logger as NestLogger, type LoggerService, type LogLevel as NestLogLevel } from '@nestjs/common';
import { isSpanContextValid, trace } from '@opentelemetry/api';
import pino, { type DestinationStream, type Logger as PinoLogger } from 'pino';

export const LOG_FORMATS = ['json', 'text'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** What a line about a run carries. Unset keys are left out of the line. */
export interface LogContext {
  org?: string;
  run_id?: string;
  command_id?: string;
  /** Used when no OpenTelemetry span is active (e.g. read from a record's `traceparent` header). */
  trace_id?: string;
  [key: string]: string | number | undefined;
}

export interface LoggingOptions {
  /** The app: `gateway`, `orchestrator`, ... */
  service: string;
  format?: LogFormat;
  level?: LogLevel;
  /** Where lines go; stdout (synchronously, so a line before process.exit is not lost) by default. */
  destination?: DestinationStream;
}

const contexts = new AsyncLocalStorage<LogContext>();

/**
 * Runs `fn` with `context` merged over the current one: every line logged inside it, including from
 * promises and callbacks it starts, carries those keys.
 */
export function withLogContext<T>(context: LogContext, fn: () => T): T {
  const merged: LogContext = { ...contexts.getStore() };
  for (const [key, value] of Object.entries(context)) if (value !== undefined && value !== '') merged[key] = value;
  return contexts.run(merged, fn);
}

/** The context lines are logged with here (empty outside any `withLogContext`). */
export function currentLogContext(): LogContext {
  return { ...contexts.getStore() };
}

/** The trace id of the active span, when one is active and valid. */
function activeTraceId(): string | undefined {
  const span = trace.getActiveSpan();
  if (!span) return undefined;
  const context = span.spanContext();
  return isSpanContextValid(context) ? context.traceId : undefined;
}

/** The trace id in a W3C `traceparent` value (`00-<trace id>-<span id>-<flags>`), or undefined. */
export function traceIdOfTraceparent(header: string | Buffer | undefined | null): string | undefined {
  if (header === undefined || header === null) return undefined;
  const m = /^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$/.exec(header.toString().trim());
  return m && !/^0+$/.test(m[1]) ? m[1] : undefined;
}

/** `{org}/{run_id}` (or a child's `{org}/{run_id}/research/3`) as the run it belongs to. */
export function runOfWorkflowId(workflowId: string | undefined): { org: string; run_id: string } | undefined {
  if (!workflowId) return undefined;
  const [org, runId] = workflowId.split('/');
  return org && runId ? { org, run_id: runId } : undefined;
}

// ---------------------------------------------------------------------------------------------------
// Secrets

/** Keys whose values never reach a log line, at the top level or one level down (`req.headers` too). */
const SECRET_KEYS = [
  'password',
  'passwd',
  'secret',
  'token',
  'access_token',
  'refresh_token',
  'api_key',
  'apiKey',
  'authorization',
  'cookie',
  'signature',
  'agentrun-signature',
  'set-cookie',
  'client_secret',
  'private_key',
  'CURSOR_SECRET',
  'DATABASE_PASSWORD',
  'KAFKA_SASL_PASSWORD',
  'KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET',
  'KAFKA_SSL_KEY_PASSWORD',
  'TEMPORAL_API_KEY',
  'MODEL_API_KEY',
  'AGENTRUN_COMMAND_KEY_SECRET',
  'AGENTRUN_EVENT_KEYS',
];
const key = (k: string): string => (/^[A-Za-z_$][\w$]*$/.test(k) ? k : `["${k}"]`);
const join = (prefix: string, k: string): string => (key(k).startsWith('[') ? `${prefix}${key(k)}` : `${prefix}.${k}`);
export const REDACTED_PATHS: string[] = SECRET_KEYS.flatMap((k) => [key(k), join('*', k), join('req.headers', k), join('headers', k), join('*.headers', k)]);
export const REDACTED = '[Redacted]';

/** Bearer tokens and the password of a URL (`postgres://user:pw@host`) cut out of free text. */
export function scrubSecrets(text: string): string {
  return text.replace(/\b(Bearer)\s+[A-Za-z0-9._~+/=-]+/gi, `$1 ${REDACTED}`).replace(/\b([a-z][a-z0-9+.-]*:\/\/[^\s:/@]+:)[^\s@/]+@/gi, `$1${REDACTED}@`);
}

function serializeError(err: unknown): unknown {
  const serialized = err instanceof Error ? (pino.stdSerializers.err(err) as unknown as Record<string, unknown>) : err;
  if (!serialized || typeof serialized !== 'object') return typeof serialized === 'string' ? scrubSecrets(serialized) : serialized;
  const out: Record<string, unknown> = { ...(serialized as Record<string, unknown>) };
  for (const field of ['message', 'stack']) if (typeof out[field] === 'string') out[field] = scrubSecrets(out[field] as string);
  return out;
}

// ---------------------------------------------------------------------------------------------------
// Text lines

const TEXT_SKIP = new Set(['time', 'level', 'service', 'pid', 'hostname', 'context', 'msg', 'err']);
const TEXT_FIRST = ['org', 'run_id', 'command_id', 'trace_id'];

/** One record as a human-readable line (and its stack on the lines after), without the newline. */
export function formatText(record: Record<string, unknown>): string {
  const level = String(record.level ?? 'info').toUpperCase().padStart(5);
  const context = record.context ? ` [${String(record.context)}]` : '';
  const fields = [...TEXT_FIRST.filter((k) => k in record), ...Object.keys(record).filter((k) => !TEXT_SKIP.has(k) && !TEXT_FIRST.includes(k))]
    .map((k) => `${k}=${typeof record[k] === 'string' ? (record[k] as string) : JSON.stringify(record[k])}`)
    .join(' ');
  let line = `${String(record.time ?? '')} ${level} ${String(record.service ?? '')}${context} ${String(record.msg ?? '')}${fields ? `  ${fields}` : ''}`;
  const err = record.err as { stack?: unknown; message?: unknown } | string | undefined;
  if (err) {
    const stack = typeof err === 'string' ? err : typeof err.stack === 'string' ? err.stack : typeof err.message === 'string' ? err.message : JSON.stringify(err);
    line += `\n${stack}`;
  }
  return line;
}

/** A JSON line turned into a text line; anything that is not one of our JSON lines unchanged. */
export function prettyLine(line: string): string {
  if (!line.startsWith('{')) return line;
  try {
    const record = JSON.parse(line) as unknown;
    if (!record || typeof record !== 'object' || !('level' in record) || !('msg' in record || 'err' in record)) return line;
    return formatText(record as Record<string, unknown>);
  } catch {
    return line;
  }
}

/** Text on stdout: pino's JSON taken back and written as a line a person reads. */
function textDestination(out: { write(chunk: string): unknown } = process.stdout): DestinationStream {
  return {
    write(chunk: string) {
      for (const line of chunk.split('\n')) if (line) out.write(`${prettyLine(line)}\n`);
    },
  };
}

// ---------------------------------------------------------------------------------------------------
// The process's logger

/** A pino logger writing our line shape. */
export function createLogger(options: LoggingOptions): PinoLogger {
  const format = options.format ?? 'json';
  const destination = options.destination ?? (format === 'json' ? pino.destination({ dest: 1, sync: true }) : undefined);
  return pino(
    {
      level: options.level ?? 'info',
      base: { service: options.service, pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      messageKey: 'msg',
      errorKey: 'err',
      serializers: { err: serializeError },
      redact: { paths: REDACTED_PATHS, censor: REDACTED },
      mixin() {
        const context: Record<string, unknown> = { ...contexts.getStore() };
        const traceId = activeTraceId();
        if (traceId) context.trace_id = traceId;
        return context;
      },
      hooks: {
        logMethod(args, method) {
          const scrubbed = args.map((a: unknown) => (typeof a === 'string' ? scrubSecrets(a) : a)) as Parameters<typeof method>;
          method.apply(this, scrubbed);
        },
      },
    },
    format === 'json' ? destination! : textDestination(options.destination ?? process.stdout),
  );
}

let root: PinoLogger | undefined;
let rootService: NestPinoLogger | undefined;

/**
 * Makes this the process's logger: Nest's `Logger` (every `new Logger(name)`) writes to it from now
 * on. Returns the Nest LoggerService to hand to NestFactory. Calling it again replaces the logger.
 */
export function installLogging(options: LoggingOptions): NestPinoLogger {
  root = createLogger(options);
  rootService = new NestPinoLogger(root);
  NestLogger.overrideLogger(rootService);
  return rootService;
}

/** True once installLogging ran in this process. */
export function loggingInstalled(): boolean {
  return root !== undefined;
}

/** The process's pino logger (a text logger on stdout until installLogging runs). */
export function rootLogger(): PinoLogger {
  root ??= createLogger({ service: 'agentrun', format: 'text' });
  return root;
}

// ---------------------------------------------------------------------------------------------------
// Nest

const NEST_LEVELS: Record<NestLogLevel, 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace'> = {
  fatal: 'fatal',
  error: 'error',
  warn: 'warn',
  log: 'info',
  debug: 'debug',
  verbose: 'trace',
};
const STACK = /^[^\n]*\n\s+at .+/;

/**
 * Nest's LoggerService over pino. Nest calls `log(message, ...params, context)` and
 * `error(message, stack?, context)`: a last string parameter is the logger's name (`context`), an
 * Error or a stack string becomes `err`, an object's fields are added to the line.
 */
export class NestPinoLogger implements LoggerService {
  constructor(private readonly logger: PinoLogger) {}

  log(message: unknown, ...params: unknown[]): void {
    this.write('log', message, params);
  }
  error(message: unknown, ...params: unknown[]): void {
    this.write('error', message, params);
  }
  warn(message: unknown, ...params: unknown[]): void {
    this.write('warn', message, params);
  }
  debug(message: unknown, ...params: unknown[]): void {
    this.write('debug', message, params);
  }
  verbose(message: unknown, ...params: unknown[]): void {
    this.write('verbose', message, params);
  }
  fatal(message: unknown, ...params: unknown[]): void {
    this.write('fatal', message, params);
  }

  /** Nest's list of enabled levels, as pino's least level. */
  setLogLevels(levels: NestLogLevel[]): void {
    const order: NestLogLevel[] = ['verbose', 'debug', 'log', 'warn', 'error', 'fatal'];
    const least = order.find((l) => levels.includes(l));
    this.logger.level = least ? NEST_LEVELS[least] : 'silent';
  }

  private write(level: NestLogLevel, message: unknown, params: unknown[]): void {
    const pinoLevel = NEST_LEVELS[level];
    if (!this.logger.isLevelEnabled(pinoLevel)) return;
    const rest = params.filter((p) => p !== undefined);
    const fields: Record<string, unknown> = {};
    // The context is last; for an error, a lone string is the stack when it looks like one.
    const last = params[params.length - 1];
    if (typeof last === 'string' && !(level === 'error' && params.length === 1 && STACK.test(last))) {
      fields.context = last;
      rest.splice(rest.lastIndexOf(last), 1);
    }
    let msg: string | undefined;
    if (message instanceof Error) {
      fields.err = message;
      msg = message.message;
    } else if (message !== null && typeof message === 'object') {
      Object.assign(fields, message);
    } else {
      msg = String(message);
    }
    const extra: unknown[] = [];
    for (const p of rest) {
      if (p instanceof Error) fields.err ??= p;
      else if (typeof p === 'string' && STACK.test(p)) fields.err ??= { message: msg, stack: p };
      else extra.push(p);
    }
    if (extra.length) fields.extra = extra;
    if (msg === undefined) this.logger[pinoLevel](fields);
    else this.logger[pinoLevel](fields, msg);
  }
}

// ---------------------------------------------------------------------------------------------------
// Temporal

type TemporalLevel = 'TRACE' | 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';
type Meta = Record<string | symbol, unknown>;

/** The shape of the Temporal SDK's `Logger` (@temporalio/common), for `Runtime.install({ logger })`. */
export interface TemporalLoggerAdapter {
  log(level: TemporalLevel, message: string, meta?: Meta): void;
  trace(message: string, meta?: Meta): void;
  debug(message: string, meta?: Meta): void;
  info(message: string, meta?: Meta): void;
  warn(message: string, meta?: Meta): void;
  error(message: string, meta?: Meta): void;
}

const TEMPORAL_LEVELS: Record<TemporalLevel, 'trace' | 'debug' | 'info' | 'warn' | 'error'> = { TRACE: 'trace', DEBUG: 'debug', INFO: 'info', WARN: 'warn', ERROR: 'error' };

/**
 * The Temporal SDK's logger as lines of ours (context `temporal`, or the SDK component): pass it to
 * `Runtime.install({ logger: temporalLogger() })`. A workflow id in the metadata names the run
 * (`org`, `run_id`); the SDK's `error` or `failure` becomes `err`.
 */
export function temporalLogger(): TemporalLoggerAdapter {
  const log = (level: TemporalLevel, message: string, meta: Meta = {}): void => {
    const logger = rootLogger();
    const pinoLevel = TEMPORAL_LEVELS[level] ?? 'info';
    if (!logger.isLevelEnabled(pinoLevel)) return;
    const fields: Record<string, unknown> = { context: typeof meta.sdkComponent === 'string' ? `temporal.${meta.sdkComponent}` : 'temporal' };
    for (const [k, v] of Object.entries(meta)) {
      if (k === 'error' || k === 'failure') fields.err = v;
      else if (k !== 'sdkComponent' && v !== undefined) fields[k] = v;
    }
    const run = runOfWorkflowId(typeof meta.workflowId === 'string' ? meta.workflowId : undefined);
    if (run) Object.assign(fields, run);
    logger[pinoLevel](fields, message);
  };
  return {
    log,
    trace: (message, meta) => log('TRACE', message, meta),
    debug: (message, meta) => log('DEBUG', message, meta),
    info: (message, meta) => log('INFO', message, meta),
    warn: (message, meta) => log('WARN', message, meta),
    error: (message, meta) => log('ERROR', message, meta),
  };
}
