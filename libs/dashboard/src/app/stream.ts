import type { RunEvent } from '@agentrun/contracts';
import { runPath } from './api';
import { credentialHeaders, rememberOrg, session } from './session';
import type { TokenDelta } from './run-view';
import { SseParser } from './sse';

/** `not-found`: a 404, asked again for a while; `absent`: still a 404 after that, no more asking. */
export type StreamStatus = 'connecting' | 'live' | 'reconnecting' | 'ended' | 'not-found' | 'absent' | 'signed-out' | 'closed';

export interface RunStreamHandlers {
  /** Events in the order they came; the caller dedupes by seq (a resume may overlap). */
  onEvents(events: RunEvent[]): void;
  onStatus(status: StreamStatus, detail?: string): void;
  /** Model reply deltas (`token` frames, no seq), in the order they came. */
  onTokens?(deltas: TokenDelta[]): void;
}

const RETRY_MS = 1_000;
const MAX_RETRY_MS = 8_000;
/** How often a 404 is asked again (about two minutes in all) before the page stops waiting for the run. */
const NOT_FOUND_TRIES = 20;

/**
 * Follows a run's SSE stream (`GET /runs/{id}/events`) until its `end` frame, resuming after
 * `resumeAfter()` on every (re)connect with `Last-Event-ID`, as EventSource would. It is read with
 * fetch rather than EventSource because EventSource cannot send headers, and local mode names the
 * org in X-Org; with a session cookie both would work the same. Returns a function that stops it.
 */
export function followRun(runId: string, resumeAfter: () => number, handlers: RunStreamHandlers): () => void {
  const controller = new AbortController();
  let stopped = false;

  const run = async (): Promise<void> => {
    let failures = 0;
    let notFound = 0;
    while (!stopped) {
      handlers.onStatus(failures === 0 ? 'connecting' : 'reconnecting');
      try {
        const after = resumeAfter();
        const res = await fetch(runPath(runId, '/events'), {
          headers: { Accept: 'text/event-stream', ...credentialHeaders(), ...(after > 0 ? { 'Last-Event-ID': String(after) } : {}) },
          credentials: 'same-origin',
          cache: 'no-store',
          signal: controller.signal,
        });
        if (res.status === 404) {
          // Unknown, or not projected yet: a run started a moment ago appears within seconds.
          const detail = await detailOf(res);
          if (++notFound >= NOT_FOUND_TRIES) return handlers.onStatus('absent', detail);
          handlers.onStatus('not-found', detail);
          failures++;
          await delay(Math.min(MAX_RETRY_MS, RETRY_MS * 2 ** (failures - 1)), controller.signal);
          continue;
        }
        if (res.status === 401) {
          const detail = await detailOf(res);
          if (session.value.kind === 'org') rememberOrg(undefined);
          session.value = { kind: 'signed-out', message: detail };
          return handlers.onStatus('signed-out', detail);
        }
        if (!res.ok || !res.body) throw new Error(`the event stream answered ${res.status}`);
        handlers.onStatus('live');
        failures = 0;
        notFound = 0;
        if (await readFrames(res.body, handlers)) return handlers.onStatus('ended');
        // Closed without an `end` frame (a gateway restart, a proxy timeout): resume.
      } catch {
        // A dropped or refused connection: resume below, after the last contiguous seq.
      }
      if (stopped) return;
      failures++;
      handlers.onStatus('reconnecting');
      await delay(Math.min(MAX_RETRY_MS, RETRY_MS * 2 ** (failures - 1)), controller.signal);
    }
  };
  void run().catch(() => handlers.onStatus('reconnecting'));

  return () => {
    stopped = true;
    controller.abort();
    handlers.onStatus('closed');
  };
}

/** Reads frames until the stream closes; true when the server said the run has ended. */
async function readFrames(body: ReadableStream<Uint8Array>, handlers: RunStreamHandlers): Promise<boolean> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const parser = new SseParser();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return false;
      const batch: RunEvent[] = [];
      const tokens: TokenDelta[] = [];
      let ended = false;
      for (const frame of parser.feed(decoder.decode(value, { stream: true }))) {
        if (frame.event === 'end') ended = true;
        else if (frame.event === 'error') throw new Error(frame.data);
        else if (frame.event === 'token') {
          try {
            tokens.push(JSON.parse(frame.data) as TokenDelta);
          } catch {
            // not a delta: ignore it
          }
        } else {
          try {
            batch.push(JSON.parse(frame.data) as RunEvent);
          } catch {
            // not an event: ignore it, as EventSource consumers ignore what they do not know
          }
        }
      }
      if (tokens.length) handlers.onTokens?.(tokens);
      if (batch.length) handlers.onEvents(batch);
      if (ended) return true;
    }
  } finally {
    // After `end` the server closes too; cancelling frees the connection at once either way.
    reader.cancel().catch(() => undefined);
  }
}

async function detailOf(res: Response): Promise<string> {
  try {
    const body = (await res.json()) as { detail?: unknown };
    return typeof body.detail === 'string' ? body.detail : `HTTP ${res.status}`;
  } catch {
    return `HTTP ${res.status}`;
  }
}

function delay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = window.setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      window.clearTimeout(timer);
      resolve();
    }, { once: true });
  });
}
