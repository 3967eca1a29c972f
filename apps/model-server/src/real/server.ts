/**
 * The real-model server: OpenAI-compatible chat completions from a GGUF model run on the CPU.
 *
 * Routes (also without the `/v1` prefix, like the scripted server): `POST /v1/chat/completions` (with
 * `stream: true`: server-sent `chat.completion.chunk` events ending in `data: [DONE]`), `GET /v1/models`,
 * `GET /healthz` (200 once the model is loaded, 503 before and while stopping).
 *
 * It listens at once and loads the model meanwhile, so a supervisor sees the port and polls /healthz.
 * Requests are answered one at a time (see queue.ts); a full queue is 503 with Retry-After. A bad body is
 * 400 with an OpenAI-style error, a body over 1 MiB 413, a prompt that leaves no room for `max_tokens` in
 * the context 400 `context_length_exceeded`. A client that goes away stops its generation.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type ServerResponse } from 'node:http';
import { errorBody, listen, MAX_BODY_BYTES, methodNotAllowed, readBody, routePath, sendJson } from '../http';
import type { LoadedModel, Prompt } from './llama-model';
import { chatHistoryOf, completionBody, finishReasonOf, isProblem, parseCompletionRequest, streamFrames, usageOf, type CompletionRequest, type ReplyMeta } from './protocol';
import { QueueClosedError, QueueFullError, SerialQueue } from './queue';

export interface RealModelServerOptions {
  /** 0 picks a free port. */
  port: number;
  host: string;
  /** The name requests must give as `model`. */
  modelName: string;
  defaultMaxTokens: number;
  /** Requests that may wait behind the running one. */
  maxWaiting: number;
  /** On close, how long the answer in progress may take before it is aborted. */
  drainMs: number;
  log?: (line: string) => void;
}

export interface RealModelServer {
  /** e.g. `http://127.0.0.1:8091/v1`. */
  readonly url: string;
  readonly port: number;
  /** Resolves with the load time once the model is loaded; rejects if it cannot be. */
  readonly loaded: Promise<{ loadMs: number }>;
  /** Chat-completion requests answered with a completion so far. */
  readonly completions: number;
  /**
   * Stops listening, turns waiting requests away (503), lets the answer in progress finish for up to
   * `drainMs` (then aborts it), disposes the model. Idempotent.
   */
  close(): Promise<void>;
}

type State = { phase: 'loading' } | { phase: 'ready'; model: LoadedModel; loadMs: number } | { phase: 'failed'; error: Error } | { phase: 'stopping' };

export async function startRealModelServer(load: () => Promise<LoadedModel>, options: RealModelServerOptions): Promise<RealModelServer> {
  const log = options.log ?? (() => undefined);
  const queue = new SerialQueue(options.maxWaiting);
  const inFlight = new Set<AbortController>();
  let state: State = { phase: 'loading' };
  let completions = 0;
  // Seconds per answer, smoothed: what a turned-away client is told to wait, per request ahead of it.
  let secondsPerAnswer = 1;

  const server = createServer((req, res) => {
    const path = routePath(req);
    if (path === '/v1/chat/completions' || path === '/chat/completions') {
      if (req.method !== 'POST') return methodNotAllowed(req, res, 'POST');
      if (state.phase !== 'ready') {
        req.resume();
        return sendJson(res, 503, errorBody(unavailable(state), 'server_error', null, 'model_unavailable'), { 'retry-after': '1' });
      }
      const { model } = state;
      readBody(req)
        .then((body) => complete(model, body, res))
        .catch((err: unknown) => {
          log(`error: ${err instanceof Error ? err.message : String(err)}`);
          res.destroy();
        });
      return;
    }
    if (path === '/v1/models' || path === '/models') {
      if (req.method !== 'GET') return methodNotAllowed(req, res, 'GET');
      return sendJson(res, 200, { object: 'list', data: [{ id: options.modelName, object: 'model', created: 0, owned_by: 'agentrun' }] });
    }
    if (path === '/healthz') {
      if (req.method !== 'GET') return methodNotAllowed(req, res, 'GET');
      if (state.phase !== 'ready') return sendJson(res, 503, { status: state.phase, message: unavailable(state) });
      return sendJson(res, 200, { status: 'ok', model: options.modelName, context_size: state.model.contextSize, chat_template: state.model.chatWrapper, load_ms: state.loadMs });
    }
    req.resume();
    sendJson(res, 404, errorBody(`no route for ${req.method ?? 'GET'} ${path}`, 'invalid_request_error', null, 'not_found'));
  });

  async function complete(model: LoadedModel, body: string | null, res: ServerResponse): Promise<void> {
    if (body === null) return sendJson(res, 413, errorBody(`the request body is larger than ${MAX_BODY_BYTES} bytes`, 'invalid_request_error', null, 'request_too_large'));
    let raw: unknown;
    try {
      raw = JSON.parse(body);
    } catch {
      return sendJson(res, 400, errorBody('the request body is not valid JSON', 'invalid_request_error'));
    }
    const request = parseCompletionRequest(raw, { model: options.modelName, defaultMaxTokens: options.defaultMaxTokens, maxTokensCap: model.contextSize });
    if (isProblem(request)) return sendJson(res, 400, errorBody(request.message, 'invalid_request_error', request.param, request.code));
    const prompt = model.prompt(chatHistoryOf(request.turns));
    if (prompt.tokens + request.maxTokens > model.contextSize) {
      const why = `the prompt is ${prompt.tokens} tokens and max_tokens ${request.maxTokens}: together more than the model's context of ${model.contextSize} tokens`;
      return sendJson(res, 400, errorBody(why, 'invalid_request_error', 'messages', 'context_length_exceeded'));
    }

    const abort = new AbortController();
    // 'close' also fires after a reply is sent; only a close before the end is a client that went away.
    res.on('close', () => {
      if (!res.writableEnded) abort.abort(new Error('the client went away'));
    });
    const started = performance.now();
    try {
      await queue.run(async () => {
        inFlight.add(abort);
        try {
          await answer(model, request, prompt, res, abort.signal);
        } finally {
          inFlight.delete(abort);
          secondsPerAnswer = 0.8 * secondsPerAnswer + 0.2 * ((performance.now() - started) / 1000);
        }
      }, abort.signal);
    } catch (err) {
      if (err instanceof QueueFullError) {
        const wait = Math.max(1, Math.ceil((err.waiting + 1) * secondsPerAnswer));
        return sendJson(res, 503, errorBody(`${err.message}; retry after ${wait} s`, 'server_error', null, 'queue_full'), { 'retry-after': String(wait) });
      }
      if (err instanceof QueueClosedError) return sendJson(res, 503, errorBody(err.message, 'server_error', null, 'shutting_down'), { 'retry-after': '1' });
      if (abort.signal.aborted) return; // nobody is listening
      log(`error: ${err instanceof Error ? err.stack ?? err.message : String(err)}`);
      if (res.headersSent) {
        if (!res.writableEnded) res.end(streamFrames(replyMeta(request), false).error('the generation failed', 'server_error'));
        return;
      }
      sendJson(res, 500, errorBody(`the generation failed: ${err instanceof Error ? err.message : String(err)}`, 'server_error'));
    }
  }

  async function answer(model: LoadedModel, request: CompletionRequest, prompt: Prompt, res: ServerResponse, signal: AbortSignal): Promise<void> {
    const meta = replyMeta(request);
    const generation = { maxTokens: request.maxTokens, temperature: request.temperature, topP: request.topP, seed: request.seed, stop: request.stop, signal };
    const started = performance.now();
    if (!request.stream) {
      const result = await model.generate(prompt, generation);
      if (signal.aborted) {
        // Cut short by a shutdown (a client that went away has no response to write to).
        sendJson(res, 503, errorBody('the server shut down before the answer was finished', 'server_error', null, 'shutting_down'), { 'retry-after': '1' });
        return;
      }
      completions++;
      sendJson(res, 200, completionBody(meta, result.text, finishReasonOf(result.stopReason), usageOf(prompt.tokens, result.completionTokens)));
      log(`200 prompt=${prompt.tokens} completion=${result.completionTokens} ${seconds(started)} s`);
      return;
    }
    const frames = streamFrames(meta, request.includeUsage);
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    res.write(frames.first());
    const onText = (text: string) => {
      if (text !== '') res.write(frames.text(text));
    };
    const result = await model.generate(prompt, { ...generation, onText });
    if (signal.aborted) {
      if (!res.destroyed) res.end(frames.error('the server shut down before the answer was finished', 'server_error'));
      return;
    }
    completions++;
    res.write(frames.finish(finishReasonOf(result.stopReason)));
    if (request.includeUsage) res.write(frames.usage(usageOf(prompt.tokens, result.completionTokens)));
    res.end(frames.done());
    log(`200 stream prompt=${prompt.tokens} completion=${result.completionTokens} ${seconds(started)} s`);
  }

  function replyMeta(request: CompletionRequest): ReplyMeta {
    return { id: `chatcmpl-${randomUUID()}`, created: Math.floor(Date.now() / 1000), model: request.model };
  }

  const { port, url } = await listen(server, options.port, options.host);

  const loadStarted = performance.now();
  const loaded = load().then(
    (model) => {
      const loadMs = Math.round(performance.now() - loadStarted);
      // Closed while loading: the model is not wanted any more.
      if (state.phase === 'stopping') return model.dispose().then(() => ({ loadMs }));
      state = { phase: 'ready', model, loadMs };
      return { loadMs };
    },
    (err: unknown) => {
      const error = err instanceof Error ? err : new Error(String(err));
      if (state.phase !== 'stopping') state = { phase: 'failed', error };
      throw error;
    },
  );

  let closing: Promise<void> | undefined;
  async function shutdown(): Promise<void> {
    const model = state.phase === 'ready' ? state.model : undefined;
    state = { phase: 'stopping' };
    const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    const drained = queue.close();
    const timer = setTimeout(() => {
      for (const controller of inFlight) controller.abort(new Error('the server is shutting down'));
    }, options.drainMs);
    await drained;
    clearTimeout(timer);
    await model?.dispose();
    server.closeAllConnections();
    await stopped;
  }

  return {
    url,
    port,
    loaded,
    get completions() {
      return completions;
    },
    close() {
      closing ??= shutdown();
      return closing;
    },
  };
}

function unavailable(state: State): string {
  switch (state.phase) {
    case 'loading':
      return 'the model is still loading';
    case 'failed':
      return `the model could not be loaded: ${state.error.message}`;
    case 'stopping':
      return 'the server is shutting down';
    case 'ready':
      return 'the model is ready';
  }
}

function seconds(since: number): string {
  return ((performance.now() - since) / 1000).toFixed(2);
}
