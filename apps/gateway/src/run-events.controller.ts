import { Controller, Get, Inject, Logger, Param, Query, Req, Res, UseGuards } from '@nestjs/common';
import { ApiHeader, ApiOperation, ApiQuery, ApiResponse, ApiTags } from '@nestjs/swagger';
import { isTerminal, type RunEventEnvelope, type RunTokenDelta } from '@agentrun/contracts';
import { contiguousPrefix, ReadModel, type StoredRunEvent } from '@agentrun/persistence';
import { contextOfTraceparent, inSpanSync, tracingState } from '@agentrun/telemetry';
import { SpanKind } from '@opentelemetry/api';
import { PLATFORM_CONFIG } from '@agentrun/runtime';
import type { Request, Response } from 'express';
import type { GatewayConfig } from './config';
import { LiveEventsHub } from './live-events.hub';
import { LiveTokensHub } from './live-tokens.hub';
import { ApiOrgScoped, ApiProblems, ApiRunIdParam } from './api-docs';
import { CurrentOrg, OrgGuard } from './org';
import { newErrorId, ProblemException } from './problem';
import { publicEvent } from './public-views';
import { sseWriter } from './sse-writer';
import { requireRunId } from './runs.controller';
import { processMetrics } from '@agentrun/telemetry';

const PAGE = 500;

/** A resume point as sent, or undefined when none was sent; an empty one is as malformed as any other. */
function parseSeq(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  if (!/^\d{1,9}$/.test(text)) throw new ProblemException(400, 'bad resume point', 'Last-Event-ID and after must be a non-negative integer seq');
  return Number(text);
}

/** Where to resume: `Last-Event-ID` wins over `after`, but a malformed one of either is refused, not ignored. */
function parseAfter(header: string | undefined, query: string | undefined): number {
  const fromHeader = parseSeq(header);
  const fromQuery = parseSeq(query);
  return fromHeader ?? fromQuery ?? 0;
}

/** Seconds from the event's `ts` to now (0 when its clock was ahead of ours; undefined when `ts` is not a time). */
export function secondsSince(ts: string, now = Date.now()): number | undefined {
  const at = Date.parse(ts);
  return Number.isFinite(at) ? Math.max(0, (now - at) / 1000) : undefined;
}

function frame(event: RunEventEnvelope): string {
  return `id: ${event.seq}\nevent: ${event.type}\ndata: ${JSON.stringify(publicEvent(event))}\n\n`;
}

/** The stream's last frame, after the run's terminal event (or on a resume at or past it). */
function endFrame(runId: string, lastSeq: number): string {
  return `event: end\ndata: ${JSON.stringify({ run_id: runId, last_seq: lastSeq })}\n\n`;
}

/** A model reply delta: no `id`, so a client's Last-Event-ID stays the last seq it had. */
export function tokenFrame({ run_id, step, attempt, index, delta }: RunTokenDelta): string {
  return `event: token\ndata: ${JSON.stringify({ run_id, step, attempt, index, delta })}\n\n`;
}

@ApiTags('runs')
@ApiOrgScoped()
@Controller('runs')
@UseGuards(OrgGuard)
export class RunEventsController {
  private readonly logger = new Logger('sse');
  private readonly visible = processMetrics().eventVisible();
  private readonly streamErrors = processMetrics().sseErrors();

  constructor(
    private readonly readModel: ReadModel,
    private readonly hub: LiveEventsHub,
    private readonly tokens: LiveTokensHub,
    @Inject(PLATFORM_CONFIG) private readonly config: GatewayConfig,
  ) {}

  /**
   * The run's events as SSE, resuming after `Last-Event-ID` (or `after`). Only the contiguous
   * prefix of seqs is sent, so a reconnect never skips or repeats one; frames are pushed when the
   * projector commits, never polled. Model replies stream in between as `token` frames without an id
   * (from the run-tokens topic, live only: a reconnect does not send the ones it missed).
   */
  @Get(':id/events')
  @ApiOperation({ summary: "The run's events as server-sent events, resumable" })
  @ApiRunIdParam()
  @ApiQuery({ name: 'after', required: false, description: 'send the events after this seq (Last-Event-ID wins)', schema: { type: 'integer', minimum: 0, maximum: 999_999_999 } })
  @ApiHeader({ name: 'Last-Event-ID', required: false, description: 'the seq of the last event received', schema: { type: 'integer', minimum: 0, maximum: 999_999_999 } })
  @ApiResponse({
    status: 200,
    description: 'a stream: `id` = seq, `event` = the event type, `data` = the run event; an `end` event after a terminal status',
    content: {
      'text/event-stream': {
        schema: {
          type: 'object',
          description: 'one event of the stream',
          required: ['data'],
          properties: {
            id: { type: 'string', pattern: '^[0-9]+$', description: 'the seq' },
            event: { type: 'string', description: 'the run event type, or `token` (no `id`; data `{run_id, step, attempt, index, delta}`: a piece of a model reply as it is written, live only; the deltas of one step and attempt in index order make its reply, and a newer attempt replaces an older one), or `end` (data `{run_id, last_seq}`) or `error` (data `{error_id}`: the stream failed, the error is logged under that id; resume with Last-Event-ID)' },
            data: { type: 'string', description: 'JSON: the run event' },
          },
        },
      },
    },
  })
  @ApiProblems(404, 429, 503)
  async stream(
    @CurrentOrg() org: string,
    @Param('id') id: string,
    @Query('after') afterQuery: string | undefined,
    @Req() req: Request,
    @Res() res: Response,
  ): Promise<void> {
    const runId = requireRunId(id);
    let last = parseAfter(req.header('last-event-id'), afterQuery);
    // `last` is a seq the read model applied: 0, or one this stream sent (not a resume point merely claimed).
    let lastApplied = last === 0;
    if (!(await this.readModel.runExists(org, runId))) throw new ProblemException(404, 'run not found', `no run '${runId}' in org ${org}`);
    if (res.destroyed) return;
    const slot = this.hub.admit(org);
    if ('status' in slot) {
      throw slot.status === 429
        ? new ProblemException(429, 'quota exceeded', slot.detail, { reason: 'quota_exceeded' })
        : new ProblemException(503, 'too many streams', slot.detail);
    }

    res.status(200);
    res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
    res.setHeader('Cache-Control', 'no-cache, no-transform');
    res.setHeader('Connection', 'keep-alive');
    res.setHeader('X-Accel-Buffering', 'no');
    res.flushHeaders();
    // Every write of this stream, frames and all, in order on one writer.
    const write = sseWriter(res);
    write(`retry: 1000\n\n`);

    let closed = false;
    // While true the stream reads its own backlog; once caught up, the hub's shared reads feed it.
    let catchingUp = true;
    let pumping = false;
    let again = false;
    const finish = (): void => {
      if (closed) return;
      closed = true;
      clearInterval(keepalive);
      unsubscribe();
      untokens();
      slot.release();
      res.end();
    };
    const fail = (err: unknown): void => {
      if (closed) return;
      // The database's own words stay in the log; the client gets the id they are logged under.
      const errorId = newErrorId();
      this.logger.error(`stream of ${org}/${runId} failed after seq ${last}, error id ${errorId}: ${(err as Error)?.stack ?? String(err)}`);
      write(`event: error\ndata: ${JSON.stringify({ error_id: errorId })}\n\n`);
      this.streamErrors.inc();
      finish();
    };
    const traced = tracingState().exporting;
    /** Sends the events past `last` (contiguous from it); true when the run ended and the stream with it. */
    const send = (events: StoredRunEvent[]): boolean => {
      for (const { event, traceparent } of events) {
        if (event.seq <= last) continue;
        // A span per frame when traces are exported, a child of the span that published the event (its
        // stored traceparent). Not even a no-op span otherwise: a commit can fan out to thousands of frames.
        if (traced) {
          inSpanSync('send sse frame', { kind: SpanKind.PRODUCER, parent: contextOfTraceparent(traceparent), attributes: { 'agentrun.run_id': runId, 'agentrun.seq': event.seq, 'agentrun.event_type': event.type } }, () =>
            write(frame(event)),
          );
        } else write(frame(event));
        // One observation per frame written: from the event's ts to now.
        const delay = secondsSince(event.ts);
        if (delay !== undefined) this.visible.observe(delay);
        last = event.seq;
        lastApplied = true;
        if (event.payload?.state && isTerminal(String(event.payload.state.status))) {
          write(endFrame(runId, last));
          finish();
          return true;
        }
      }
      return false;
    };
    const catchUp = async (): Promise<void> => {
      if (pumping) {
        again = true;
        return;
      }
      pumping = true;
      catchingUp = true;
      try {
        do {
          again = false;
          for (;;) {
            const events = contiguousPrefix(await this.readModel.eventsAfter(org, runId, last, PAGE), last);
            if (closed) return;
            if (events.length === 0) {
              // Resumed at or past the end of a finished run (or its `end` frame was lost): say so.
              if (await this.finishedBy(org, runId, last)) {
                write(endFrame(runId, last));
                finish();
                return;
              }
              break;
            }
            if (send(events)) return;
            if (events.length < PAGE) break;
          }
        } while (again && !closed);
        catchingUp = false;
      } catch (err) {
        fail(err);
      } finally {
        pumping = false;
      }
    };
    // Subscribe before the first read, so a commit between the two is not missed.
    const unsubscribe = this.hub.subscribe(org, runId, {
      cursor: () => (catchingUp || closed ? undefined : last),
      cursorApplied: () => lastApplied,
      wake: () => {
        again = true;
      },
      deliver: (events, after) => {
        if (closed) return;
        // Read from before this stream caught up: the gap is read by the stream itself.
        if (after > last) return void catchUp();
        send(events);
      },
      fail,
    });
    const untokens = this.tokens.subscribe(org, runId, (delta) => {
      if (!closed) write(tokenFrame(delta));
    });
    const keepalive = setInterval(() => write(`: keepalive\n\n`), this.config.SSE_KEEPALIVE_SECONDS * 1000);
    res.on('close', finish);
    await catchUp();
  }

  /** The run is terminal and the client has everything up to its last event. */
  private async finishedBy(org: string, runId: string, last: number): Promise<boolean> {
    const run = await this.readModel.getRun(org, runId);
    return run !== undefined && isTerminal(run.status) && last >= run.last_seq;
  }
}
