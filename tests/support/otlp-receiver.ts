import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';

/** One span as an OTLP/HTTP receiver gets it (JSON encoding: ids in hex), with its service. */
export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  /** OTLP's span kind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  attributes: Record<string, string | number | boolean>;
  links: { traceId: string; spanId: string }[];
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
}
interface OtlpAttribute {
  key: string;
  value: OtlpValue;
}
interface OtlpRequest {
  resourceSpans?: {
    resource?: { attributes?: OtlpAttribute[] };
    scopeSpans?: { spans?: { traceId: string; spanId: string; parentSpanId?: string; name: string; kind: number; attributes?: OtlpAttribute[]; links?: { traceId: string; spanId: string }[] }[] }[];
  }[];
}

function valueOf(v: OtlpValue): string | number | boolean {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  return v.boolValue ?? '';
}

function attributesOf(list: OtlpAttribute[] | undefined): Record<string, string | number | boolean> {
  return Object.fromEntries((list ?? []).map((a) => [a.key, valueOf(a.value)]));
}

/** Reads an OTLP/HTTP JSON export request into spans (the 0.57 exporter sends JSON, ids as hex). */
export function decodeOtlpJson(body: OtlpRequest): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const rs of body.resourceSpans ?? []) {
    const service = String(attributesOf(rs.resource?.attributes)['service.name'] ?? '');
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        spans.push({
          service,
          traceId: s.traceId,
          spanId: s.spanId,
          ...(s.parentSpanId ? { parentSpanId: s.parentSpanId } : {}),
          name: s.name,
          kind: s.kind,
          attributes: attributesOf(s.attributes),
          links: (s.links ?? []).map((l) => ({ traceId: l.traceId, spanId: l.spanId })),
        });
      }
    }
  }
  return spans;
}

/**
 * A plain OTLP/HTTP trace receiver on a free loopback port: POST /v1/traces with a JSON body (gzip or
 * not) is kept; anything else (protobuf included) is a 415 or 404, so a change of the exporter's
 * encoding fails loudly instead of losing spans.
 */
export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  /** Export requests received (accepted or not). */
  requests = 0;
  refused = 0;
  /** Bytes of accepted export requests. */
  bytes = 0;
  private constructor(
    private readonly server: Server,
    private readonly decode: boolean,
  ) {}

  /** `decode: false` (benchmarks) accepts JSON exports without reading them into spans: counts requests and bytes only. */
  static async start(options: { decode?: boolean } = {}): Promise<OtlpReceiver> {
    const server = createServer();
    const receiver = new OtlpReceiver(server, options.decode ?? true);
    server.on('request', (req, res) => {
      void receiver.handle(req).then((status) => {
        res.writeHead(status, { 'Content-Type': 'application/json' });
        res.end(status === 200 ? '{}' : '');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return receiver;
  }

  /** The base URL: what OTEL_EXPORTER_OTLP_ENDPOINT names (the exporter appends /v1/traces). */
  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  private async handle(req: IncomingMessage): Promise<number> {
    this.requests += 1;
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    if (req.method !== 'POST' || req.url !== '/v1/traces') return (this.refused += 1), 404;
    if (!String(req.headers['content-type'] ?? '').startsWith('application/json')) return (this.refused += 1), 415;
    const raw = Buffer.concat(chunks);
    this.bytes += raw.length;
    if (!this.decode) return 200;
    try {
      const body = req.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw;
      this.spans.push(...decodeOtlpJson(JSON.parse(body.toString('utf8')) as OtlpRequest));
      return 200;
    } catch {
      this.refused += 1;
      return 400;
    }
  }

  inTrace(traceId: string): ReceivedSpan[] {
    return this.spans.filter((s) => s.traceId === traceId);
  }

  clear(): void {
    this.spans.length = 0;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
