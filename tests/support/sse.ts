import { request, type IncomingMessage } from 'node:http';
import { performance } from 'node:perf_hooks';

export interface SseFrame {
  id?: string;
  event: string;
  data: string;
  /** When it was read (performance.now()). */
  at: number;
}

/** A minimal SSE client that records every frame, as a browser's EventSource would receive them. */
export class SseClient {
  readonly frames: SseFrame[] = [];
  status = 0;
  ended = false;
  private response?: IncomingMessage;
  private buffer = '';
  private readonly done: Promise<void>;

  constructor(url: string, headers: Record<string, string>) {
    this.done = new Promise((resolve, reject) => {
      const req = request(url, { headers: { Accept: 'text/event-stream', ...headers } }, (res) => {
        this.response = res;
        this.status = res.statusCode ?? 0;
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => this.feed(chunk));
        res.on('end', () => {
          this.ended = true;
          resolve();
        });
        res.on('error', () => {
          this.ended = true;
          resolve();
        });
      });
      req.on('error', reject);
      req.end();
    });
    this.done.catch(() => undefined);
  }

  private feed(chunk: string): void {
    this.buffer += chunk;
    let cut: number;
    while ((cut = this.buffer.indexOf('\n\n')) >= 0) {
      const block = this.buffer.slice(0, cut);
      this.buffer = this.buffer.slice(cut + 2);
      const frame: SseFrame = { event: 'message', data: '', at: performance.now() };
      let hasData = false;
      for (const line of block.split('\n')) {
        if (line.startsWith(':') || line === '') continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'id') frame.id = value;
        else if (field === 'event') frame.event = value;
        else if (field === 'data') {
          frame.data += (hasData ? '\n' : '') + value;
          hasData = true;
        }
      }
      if (hasData) this.frames.push(frame);
    }
  }

  /** Run events received (the `end` and other control frames left out). */
  events<T = { seq: number; type: string; payload: { state?: { status: string } } }>(): T[] {
    return this.frames.filter((f) => f.id !== undefined).map((f) => JSON.parse(f.data) as T);
  }

  close(): void {
    this.response?.destroy();
  }

  async finished(): Promise<void> {
    await this.done;
  }
}
