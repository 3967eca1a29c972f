import { Logger } from '@nestjs/common';
import { context as otelContext, trace, type SpanContext } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  createLogger,
  currentLogContext,
  formatText,
  installLogging,
  NestPinoLogger,
  prettyLine,
  runOfWorkflowId,
  scrubSecrets,
  temporalLogger,
  traceIdOfTraceparent,
  withLogContext,
  type LogFormat,
} from './logging';

/** A destination that keeps what was written. */
function capture(): { write(chunk: string): void; lines: () => string[]; records: () => Record<string, unknown>[] } {
  let text = '';
  return {
    write: (chunk: string) => void (text += chunk),
    lines: () => text.split('\n').filter(Boolean),
    records: () => text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

function nest(format: LogFormat = 'json', level: 'debug' | 'info' = 'info') {
  const out = capture();
  const service = new NestPinoLogger(createLogger({ service: 'orchestrator', format, level, destination: out }));
  return { out, service };
}

describe('JSON lines', () => {
  it('have time, level, service, context and msg, and nothing else outside a run', () => {
    const { out, service } = nest();
    service.log('listening on :8081', 'orchestrator');
    service.warn('slow', 'CommandConsumer');
    const [info, warn] = out.records();
    expect(info).toEqual({ time: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/), level: 'info', service: 'orchestrator', pid: process.pid, context: 'orchestrator', msg: 'listening on :8081' });
    expect(warn).toMatchObject({ level: 'warn', context: 'CommandConsumer', msg: 'slow' });
  });

  it('an error carries err with its stack, whether Nest passes a stack string or an Error', () => {
    const { out, service } = nest();
    const err = new TypeError('boom');
    service.error('failed to start', err.stack, 'gateway');
    service.error('failed again', err, 'gateway');
    service.error(err, 'gateway');
    // Nest's Logger.error(message) with a context: the stack slot is undefined.
    service.error('no stack', undefined, 'gateway');
    const [a, b, c, d] = out.records();
    expect(a).toMatchObject({ level: 'error', context: 'gateway', msg: 'failed to start', err: { stack: expect.stringMatching(/^TypeError: boom\n\s+at /) } });
    expect(b).toMatchObject({ msg: 'failed again', err: { type: 'TypeError', message: 'boom', stack: expect.stringContaining('logging.spec.ts') } });
    expect(c).toMatchObject({ msg: 'boom', context: 'gateway', err: { type: 'TypeError' } });
    expect(d).toMatchObject({ msg: 'no stack', context: 'gateway' });
    expect(d).not.toHaveProperty('err');
  });

  it('a lone stack passed to error() is the stack, not the context', () => {
    const { out, service } = nest();
    service.error('x', new Error('y').stack);
    expect(out.records()[0]).not.toHaveProperty('context');
    expect(out.records()[0]).toMatchObject({ err: { stack: expect.stringMatching(/^Error: y/) } });
  });

  it('keeps Nest Logger call sites working once installed', () => {
    const out = capture();
    installLogging({ service: 'projector', destination: out });
    new Logger('RunEventProjector').log('applied');
    new Logger('RunEventProjector').error('failed', new Error('e').stack);
    Logger.warn('static', 'Somewhere');
    expect(out.records()).toEqual([
      expect.objectContaining({ service: 'projector', context: 'RunEventProjector', msg: 'applied', level: 'info' }),
      expect.objectContaining({ context: 'RunEventProjector', msg: 'failed', level: 'error', err: expect.objectContaining({ stack: expect.stringMatching(/^Error: e/) }) }),
      expect.objectContaining({ context: 'Somewhere', msg: 'static', level: 'warn' }),
    ]);
  });

  it('levels below the configured one are not written; objects add fields', () => {
    const { out, service } = nest('json', 'info');
    service.debug('hidden', 'X');
    service.verbose('hidden', 'X');
    service.log({ msg: 'as object', batch: 3 }, 'X');
    expect(out.records()).toEqual([expect.objectContaining({ msg: 'as object', batch: 3, context: 'X' })]);
    const debug = nest('json', 'debug');
    debug.service.debug('shown', 'X');
    expect(debug.out.records()).toEqual([expect.objectContaining({ level: 'debug', msg: 'shown' })]);
  });
});

describe('the run context', () => {
  it('is merged into every line logged within withLogContext, across awaits and nested scopes', async () => {
    const { out, service } = nest();
    await withLogContext({ org: 'acme', run_id: 'r1', command_id: 'c1' }, async () => {
      service.log('decided', 'CommandConsumer');
      await new Promise((resolve) => setImmediate(resolve));
      await withLogContext({ run_id: 'r2', command_id: undefined }, async () => {
        await Promise.resolve();
        service.warn('inner', 'CommandConsumer');
        expect(currentLogContext()).toEqual({ org: 'acme', run_id: 'r2', command_id: 'c1' });
      });
      service.log('after', 'CommandConsumer');
    });
    service.log('outside', 'CommandConsumer');
    const [decided, inner, after, outside] = out.records();
    expect(decided).toMatchObject({ org: 'acme', run_id: 'r1', command_id: 'c1', msg: 'decided' });
    expect(inner).toMatchObject({ org: 'acme', run_id: 'r2', command_id: 'c1' });
    expect(after).toMatchObject({ run_id: 'r1' });
    expect(outside).not.toHaveProperty('run_id');
    expect(outside).not.toHaveProperty('org');
  });

  it('two concurrent runs keep their own context', async () => {
    const { out, service } = nest();
    const work = (run: string, delay: number) =>
      withLogContext({ org: 'o', run_id: run }, async () => {
        await new Promise((resolve) => setTimeout(resolve, delay));
        service.log(`done ${run}`, 'w');
      });
    await Promise.all([work('slow', 20), work('fast', 1)]);
    const byMsg = Object.fromEntries(out.records().map((r) => [r.msg, r.run_id]));
    expect(byMsg).toEqual({ 'done slow': 'slow', 'done fast': 'fast' });
  });

  it('takes trace_id from the active span, else from the context, and leaves it out without either', () => {
    const manager = new AsyncLocalStorageContextManager().enable();
    otelContext.setGlobalContextManager(manager);
    try {
      const { out, service } = nest();
      const spanContext: SpanContext = { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', traceFlags: 1 };
      otelContext.with(trace.setSpanContext(otelContext.active(), spanContext), () => service.log('in a span', 'x'));
      const invalid: SpanContext = { traceId: '00000000000000000000000000000000', spanId: '0000000000000000', traceFlags: 0 };
      otelContext.with(trace.setSpanContext(otelContext.active(), invalid), () => service.log('invalid span', 'x'));
      withLogContext({ run_id: 'r', trace_id: 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' }, () => service.log('from the header', 'x'));
      service.log('none', 'x');
      const [span, bad, header, none] = out.records();
      expect(span.trace_id).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
      expect(bad).not.toHaveProperty('trace_id');
      expect(header.trace_id).toBe('aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa');
      expect(none).not.toHaveProperty('trace_id');
    } finally {
      otelContext.disable();
    }
  });

  it('reads trace ids from traceparent headers and runs from workflow ids', () => {
    expect(traceIdOfTraceparent('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01')).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
    expect(traceIdOfTraceparent(Buffer.from('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00'))).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
    expect(traceIdOfTraceparent('00-00000000000000000000000000000000-00f067aa0ba902b7-01')).toBeUndefined();
    expect(traceIdOfTraceparent('garbage')).toBeUndefined();
    expect(traceIdOfTraceparent(undefined)).toBeUndefined();
    expect(runOfWorkflowId('acme/run-1')).toEqual({ org: 'acme', run_id: 'run-1' });
    expect(runOfWorkflowId('acme/run-1/research/3')).toEqual({ org: 'acme', run_id: 'run-1' });
    expect(runOfWorkflowId('snapshots-cron')).toBeUndefined();
  });
});

describe('secrets', () => {
  it('redacts secret keys at the top level, one level down and in headers', () => {
    const { out, service } = nest();
    service.log(
      {
        msg: 'request',
        token: 'tok-1',
        config: { DATABASE_PASSWORD: 'pw-2', MODEL_API_KEY: 'mk-3', harmless: 'kept' },
        req: { headers: { authorization: 'Bearer tok-4', cookie: 'agentrun_session=s-5', host: 'h' } },
        headers: { 'agentrun-signature': 'sig-6', 'agentrun-key-id': 'k1' },
      },
      'x',
    );
    const line = out.lines()[0];
    for (const secret of ['tok-1', 'pw-2', 'mk-3', 'tok-4', 's-5', 'sig-6']) expect(line).not.toContain(secret);
    expect(JSON.parse(line)).toMatchObject({ token: '[Redacted]', config: { harmless: 'kept', DATABASE_PASSWORD: '[Redacted]' }, headers: { 'agentrun-key-id': 'k1' }, req: { headers: { host: 'h' } } });
  });

  it('cuts bearer tokens and URL passwords out of messages and stacks', () => {
    const { out, service } = nest();
    const err = new Error('connect postgres://agentrun:hunter2@db:5432/x failed');
    service.error('sent Authorization: Bearer abc.def-ghi to postgres://u:p4ss@h/db', err, 'x');
    const line = out.lines()[0];
    expect(line).not.toMatch(/abc\.def-ghi|hunter2|p4ss/);
    expect(JSON.parse(line)).toMatchObject({ msg: 'sent Authorization: Bearer [Redacted] to postgres://u:[Redacted]@h/db', err: { message: 'connect postgres://agentrun:[Redacted]@db:5432/x failed' } });
    expect(scrubSecrets('no secrets here: http://example.com/a@b')).toBe('no secrets here: http://example.com/a@b');
  });
});

describe('text lines', () => {
  it('are one readable line per record with the run fields, the stack below', () => {
    const { out, service } = nest('text');
    withLogContext({ org: 'acme', run_id: 'r1', command_id: 'c1' }, () => service.warn('not decided', 'CommandConsumer'));
    service.error('failed to start: no Kafka', new Error('no Kafka').stack, 'projector');
    const lines = out.lines();
    expect(lines[0]).toMatch(/^\d{4}-\d\d-\d\dT[\d:.]+Z {2}WARN orchestrator \[CommandConsumer\] not decided {2}org=acme run_id=r1 command_id=c1$/);
    expect(lines[1]).toMatch(/ERROR orchestrator \[projector\] failed to start: no Kafka$/);
    expect(lines[2]).toBe('Error: no Kafka');
    expect(lines[3]).toMatch(/^\s+at /);
    expect(lines.filter((l) => l.includes('{'))).toEqual([]);
  });

  it('prettyLine turns our JSON lines into text and leaves anything else alone', () => {
    const { out, service } = nest();
    withLogContext({ run_id: 'r9' }, () => service.log('hello', 'ctx'));
    expect(prettyLine(out.lines()[0])).toMatch(/ INFO orchestrator \[ctx\] hello {2}run_id=r9$/);
    expect(prettyLine('==> .stack/logs/apps/gateway.log <==')).toBe('==> .stack/logs/apps/gateway.log <==');
    expect(prettyLine('{"not":"ours"}')).toBe('{"not":"ours"}');
    expect(prettyLine('{broken')).toBe('{broken');
    expect(formatText({ time: 't', level: 'info', msg: 'm', batch: 2, ok: true })).toBe('t  INFO  m  batch=2 ok=true');
  });
});

describe('the Temporal logger adapter', () => {
  it('writes the SDK lines as ours, with the run from the workflow id and err from the error', () => {
    const out = capture();
    installLogging({ service: 'gpu-worker', level: 'debug', destination: out });
    const log = temporalLogger();
    log.warn('Activity failed', { sdkComponent: 'activity', workflowId: 'acme/run-7', activityType: 'runTool', attempt: 2, error: new Error('lease lost') });
    log.log('INFO', 'Worker state changed', { sdkComponent: 'worker', state: 'RUNNING' });
    log.trace('not shown');
    log.debug('shown');
    const [failed, state, debug] = out.records();
    expect(failed).toMatchObject({ service: 'gpu-worker', level: 'warn', context: 'temporal.activity', msg: 'Activity failed', org: 'acme', run_id: 'run-7', activityType: 'runTool', attempt: 2, err: { message: 'lease lost', stack: expect.any(String) } });
    expect(state).toMatchObject({ level: 'info', context: 'temporal.worker', state: 'RUNNING' });
    expect(state).not.toHaveProperty('run_id');
    expect(debug).toMatchObject({ level: 'debug', context: 'temporal', msg: 'shown' });
    expect(out.records()).toHaveLength(3);
  });
});
