import type { Socket } from 'node:net';

/** What the writer needs of a Node HTTP response whose headers are sent. */
export interface SseResponse {
  write(text: string): boolean;
  readonly socket: Socket | null;
  readonly writableEnded: boolean;
  readonly headersSent: boolean;
  /** Node's own: the response is framed as chunks (HTTP/1.1 without a length), decided when its head was sent. */
  readonly chunkedEncoding?: boolean;
}

/**
 * Writes a stream's text straight to its socket, each write framed as one HTTP chunk in one string,
 * where Node itself would write to the socket directly; `res.write` everywhere else (the head not sent,
 * an unchunked response, a pipelined request's answer that has no socket yet). A commit fans out to
 * thousands of frames at once, and `res.write` makes each four buffers (the chunk's size, its CRLF, the
 * text, the closing CRLF) and a corked write flushed on the next tick; one string is less work in the
 * gateway (docs/BENCHMARKS.md, the console: commit -> frame p50 0.90x at 1,000 streams). Every write of
 * a stream goes through one writer, so they stay in order; `res.end()` still ends the response (Node
 * sends the last chunk).
 */
export function sseWriter(res: SseResponse): (text: string) => void {
  return (text) => {
    const socket = res.socket;
    // Ended, or the client gone: nothing is written (a write after the end would be an error).
    if (text.length === 0 || res.writableEnded || socket?.destroyed) return;
    // Node's own test for writing to the socket directly (OutgoingMessage._writeRaw), once the head is
    // out: this response is the socket's current one and holds nothing back. Otherwise (a pipelined
    // request's answer waiting its turn, with no socket yet; an unchunked response) `res.write` frames
    // the text and Node sends it in order.
    const held = (res as { outputData?: unknown[] }).outputData;
    if (!socket || !res.headersSent || res.chunkedEncoding !== true || (socket as { _httpMessage?: unknown })._httpMessage !== res || !socket.writable || held === undefined || held.length > 0) {
      res.write(text);
      return;
    }
    socket.write(`${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`);
  };
}
