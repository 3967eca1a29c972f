import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { sseWriter } from './sse-writer';

/** A real server whose one handler is the test's; the raw bytes the client reads (no chunk decoding). */
async function serve(handler: (res: ServerResponse) => void): Promise<{ server: Server; port: number }> {
  const server = createServer((_req, res) => handler(res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port };
}

function get(port: number, httpVersion11 = true): Promise<{ res: IncomingMessage; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ port, host: '127.0.0.1', path: '/', headers: httpVersion11 ? {} : { Connection: 'close' } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ res, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('sseWriter', () => {
  it('writes each text as one chunk a client decodes in order, res.end after them', async () => {
    let wroteViaRes = -1;
    const { server, port } = await serve((res) => {
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      res.flushHeaders();
      const write = sseWriter(res);
      const viaRes = jest.spyOn(res, 'write');
      write('retry: 1000\n\n');
      write('id: 1\ndata: {"é":"ü"}\n\n');
      write('');
      write('id: 2\ndata: {}\n\n');
      // Straight to the socket, not through res.write.
      wroteViaRes = viaRes.mock.calls.length;
      res.end();
      // Once ended nothing more is written, and nothing throws.
      write('id: 3\ndata: {}\n\n');
    });
    try {
      const { res, body } = await get(port);
      expect(res.headers['transfer-encoding']).toBe('chunked');
      expect(body).toBe('retry: 1000\n\nid: 1\ndata: {"é":"ü"}\n\n' + 'id: 2\ndata: {}\n\n');
      expect(wroteViaRes).toBe(0);
    } finally {
      server.close();
    }
  });

  it('leaves the framing to Node when the response is not chunked', async () => {
    const { server, port } = await serve((res) => {
      res.useChunkedEncodingByDefault = false;
      res.writeHead(200, { 'Content-Type': 'text/event-stream', Connection: 'close' });
      res.flushHeaders();
      const write = sseWriter(res);
      write('id: 1\ndata: {}\n\n');
      res.end();
    });
    try {
      const { res, body } = await get(port, false);
      expect(res.headers['transfer-encoding']).toBeUndefined();
      expect(body).toBe('id: 1\ndata: {}\n\n');
    } finally {
      server.close();
    }
  });

  it('a pipelined request answered after another gets every frame, through res.write until it has the socket', async () => {
    const { server, port } = await serve((res) => {
      const path = (res.req.url ?? '/').split('?')[0];
      if (path === '/slow') {
        setTimeout(() => res.end('slow'), 100);
        return;
      }
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      res.flushHeaders();
      const write = sseWriter(res);
      write('retry: 1000\n\n');
      write('id: 1\ndata: {}\n\n');
      setTimeout(() => {
        write('id: 2\ndata: {}\n\n');
        res.end();
      }, 200);
    });
    try {
      const raw = await new Promise<string>((resolve, reject) => {
        const socket = connect(port, '127.0.0.1');
        let text = '';
        socket.setEncoding('utf8');
        socket.on('data', (d: string) => {
          text += d;
          if (text.includes('0\r\n\r\n') && text.includes('id: 2')) {
            socket.destroy();
            resolve(text);
          }
        });
        socket.on('error', reject);
        socket.write('GET /slow HTTP/1.1\r\nHost: x\r\n\r\nGET /events HTTP/1.1\r\nHost: x\r\n\r\n');
      });
      const events = raw.slice(raw.indexOf('text/event-stream'));
      expect(raw.indexOf('slow')).toBeLessThan(raw.indexOf('text/event-stream'));
      expect(events).toContain('retry: 1000');
      expect(events.indexOf('retry: 1000')).toBeLessThan(events.indexOf('id: 1'));
      expect(events.indexOf('id: 1')).toBeLessThan(events.indexOf('id: 2'));
    } finally {
      server.close();
    }
  });
});
