import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
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
});
