import { Controller, Get, Module, Param, Res } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { INestApplication } from '@nestjs/common';
import type { Response } from 'express';
import { AgentRunMetrics } from '@agentrun/telemetry';
import { httpMetrics, methodLabel, routeLabel } from './http-metrics';

@Controller('runs')
class RunsForTest {
  @Get(':id')
  get(@Param('id') id: string): { run_id: string } {
    return { run_id: id };
  }

  @Get(':id/events')
  events(@Res() res: Response): void {
    res.status(200).type('text/event-stream').end('retry: 1000\n\n');
  }
}

@Module({ controllers: [RunsForTest] })
class TestModule {}

/** Sample lines of one family, without the help and type lines. */
function samples(text: string, name: string): string[] {
  return text.split('\n').filter((l) => l.startsWith(`${name}{`));
}

describe('HTTP metrics', () => {
  let app: INestApplication;
  let base: string;
  const metrics = new AgentRunMetrics();

  beforeAll(async () => {
    app = await NestFactory.create(TestModule, { logger: false });
    app.use(httpMetrics(metrics));
    await app.listen(0, '127.0.0.1');
    base = await app.getUrl();
  });
  afterAll(async () => {
    await app.close();
  });

  it('labels a request by its Nest route template, never by the run id in its path, and an unmatched one as unmatched', async () => {
    for (const id of ['run-1', 'run-2', 'run-3']) expect((await fetch(`${base}/runs/${id}`)).status).toBe(200);
    expect((await fetch(`${base}/runs/run-9/events`)).status).toBe(200);
    expect((await fetch(`${base}/nowhere/run-1`)).status).toBe(404);
    expect((await fetch(`${base}/runs/run-1`, { method: 'DELETE' })).status).toBe(404);

    // The counter is written when the response finishes, which may follow the client's read by a tick.
    const deadline = Date.now() + 2_000;
    let text = '';
    while (Date.now() < deadline) {
      text = await metrics.registry.metrics();
      if (samples(text, 'agentrun_http_requests_total').length >= 4) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(samples(text, 'agentrun_http_requests_total').sort()).toEqual([
      'agentrun_http_requests_total{route="/runs/:id",method="GET",status="200"} 3',
      'agentrun_http_requests_total{route="/runs/:id/events",method="GET",status="200"} 1',
      'agentrun_http_requests_total{route="unmatched",method="DELETE",status="404"} 1',
      'agentrun_http_requests_total{route="unmatched",method="GET",status="404"} 1',
    ]);
    expect(text).not.toContain('run-1');
    expect(text).toContain('agentrun_http_request_duration_seconds_count{route="/runs/:id",method="GET",status="200"} 3');
  });

  it('bounds the method and reads the template from the matched route only', () => {
    expect(methodLabel('get')).toBe('GET');
    expect(methodLabel('PROPFIND')).toBe('other');
    expect(routeLabel({ route: undefined, baseUrl: '' })).toBe('unmatched');
    expect(routeLabel({ route: { path: '/runs/:id' }, baseUrl: '' })).toBe('/runs/:id');
    expect(routeLabel({ route: { path: '/:id' }, baseUrl: '/runs' })).toBe('/runs/:id');
  });
});
