/** One server-sent event, as the SSE wire format defines it (comments and `retry:` lines are dropped). */
export interface SseFrame {
  id?: string;
  event: string;
  data: string;
}

/**
 * An incremental parser of `text/event-stream`: feed it decoded text as it arrives, in chunks of any
 * size, and it returns the frames that chunk completed. A frame split across chunks comes out once.
 */
export class SseParser {
  private buffer = '';
  private id: string | undefined;
  private event = '';
  private data: string[] = [];

  feed(text: string): SseFrame[] {
    this.buffer += text;
    const frames: SseFrame[] = [];
    for (;;) {
      const end = this.lineEnd();
      if (end === undefined) break;
      const line = this.buffer.slice(0, end.at);
      this.buffer = this.buffer.slice(end.at + end.length);
      const frame = this.line(line);
      if (frame) frames.push(frame);
    }
    return frames;
  }

  /** The first line ending in the buffer; a lone `\r` at its very end may still become `\r\n`. */
  private lineEnd(): { at: number; length: number } | undefined {
    for (let i = 0; i < this.buffer.length; i++) {
      const c = this.buffer[i];
      if (c === '\n') return { at: i, length: 1 };
      if (c === '\r') {
        if (i + 1 === this.buffer.length) return undefined;
        return { at: i, length: this.buffer[i + 1] === '\n' ? 2 : 1 };
      }
    }
    return undefined;
  }

  private line(line: string): SseFrame | undefined {
    if (line === '') {
      if (this.data.length === 0) {
        this.event = '';
        return undefined;
      }
      const frame: SseFrame = { event: this.event || 'message', data: this.data.join('\n'), ...(this.id !== undefined ? { id: this.id } : {}) };
      this.event = '';
      this.data = [];
      return frame;
    }
    if (line.startsWith(':')) return undefined;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.data.push(value);
    else if (field === 'event') this.event = value;
    else if (field === 'id' && !value.includes('\0')) this.id = value;
    return undefined;
  }
}
