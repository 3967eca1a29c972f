import { SseParser } from './sse';

describe('SseParser', () => {
  it('reads the frames the gateway sends: id, event, data, comments and retry lines skipped', () => {
    const parser = new SseParser();
    const text = 'retry: 1000\n\n: keepalive\n\nid: 1\nevent: run_started\ndata: {"seq":1}\n\nid: 2\nevent: step_completed\ndata: {"seq":2}\n\nevent: end\ndata: {"last_seq":2}\n\n';
    expect(parser.feed(text)).toEqual([
      { id: '1', event: 'run_started', data: '{"seq":1}' },
      { id: '2', event: 'step_completed', data: '{"seq":2}' },
      { id: '2', event: 'end', data: '{"last_seq":2}' },
    ]);
  });

  it('a frame split across chunks at any point comes out once, whole', () => {
    const text = 'id: 7\nevent: goal_changed\ndata: {"a":1,\ndata: "b":2}\n\nid: 8\r\nevent: x\r\ndata: y\r\n\r\n';
    for (let size = 1; size <= text.length; size++) {
      const parser = new SseParser();
      const frames = [];
      for (let i = 0; i < text.length; i += size) frames.push(...parser.feed(text.slice(i, i + size)));
      expect({ size, frames }).toEqual({
        size,
        frames: [
          { id: '7', event: 'goal_changed', data: '{"a":1,\n"b":2}' },
          { id: '8', event: 'x', data: 'y' },
        ],
      });
    }
  });

  it('a frame with no data is no frame, and an unnamed one is a message', () => {
    const parser = new SseParser();
    expect(parser.feed('event: nothing\n\ndata: plain\n\n')).toEqual([{ event: 'message', data: 'plain' }]);
  });
});
