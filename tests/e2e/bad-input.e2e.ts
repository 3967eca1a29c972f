import { request } from 'node:http';
import type { Producer } from 'kafkajs';
import { MAX_COMMAND_BYTES, MAX_JSON_DEPTH, TOPICS, type CommandOutcome, type DlqRecord, type RunEventEnvelope } from '@agentrun/contracts';
import { oneToN, scriptedRunShape, seqsOnTopic } from '../support/invariants';
import { Platform, uniqueId, type TopicRecord } from '../support/platform';
import { waitFor } from '../support/wait';

/**
 * Bad input over HTTP and Kafka, thrown at one platform while two real runs are in flight: every
 * piece gets a clear 4xx or a DLQ record or a rejected outcome (never a 500, never a stall), legal
 * unicode is stored exactly, and the runs in flight end as they would have without it.
 */

const SQL = ["' OR 1=1 --", '"; DROP TABLE runs; --'];
/** The same, without spaces: a command id may be any printable ASCII. */
const SQL_IDS = ["'OR'1'='1'--", '";DROP/**/TABLE/**/runs;--'];
/** Legal unicode: stored and echoed exactly, never normalised. */
const UNICODE = [
  'ship it 🚀🔥 👩‍👩‍👧 (ZWJ)',
  'مرحبا \u202Eevil\u202C שלום',
  'Z\u0351\u0352a\u0300\u0301lgo: e\u0301 is not \u00e9',
  '𝒜𝓁𝑔𝑜 \u{10FFFD} \u{1F600}',
  "' OR 1=1 -- 😀 \u202E 𝒜",
];
const LEGAL = [...SQL, ...UNICODE];
/** Text Postgres cannot store: refused at the boundary with a message naming the field. */
const ILLEGAL = ['nul \u0000 inside', 'lone high \ud800 surrogate', 'lone low \udc00 surrogate'];

const MODEL = "模型 ' OR 1=1 -- 🚀";
const REVIEWER = 'ålïcé 😀';
const SUITE = 'سویت \u202E e\u0301';
const AGENT_STEPS = 120;
const EVAL_CASES = 32;

interface RawAnswer {
  status: number;
  contentType: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- problem bodies are read field by field
  body: any;
}

/** An HTTP request with exactly these bytes and headers (fetch would refuse some of them). */
function rawHttp(port: number, method: string, path: string, headers: Record<string, string>, body?: Buffer | string): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let parsed: unknown = text;
        try {
          parsed = JSON.parse(text);
        } catch {
          // keep the text
        }
        resolve({ status: res.statusCode ?? 0, contentType: String(res.headers['content-type'] ?? ''), body: parsed });
      });
    });
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

/** A value as a path segment or query value; a lone surrogate (which encodeURIComponent refuses) as its WTF-8 bytes. */
function encode(value: string): string {
  return [...value]
    .map((ch) => {
      const unit = ch.codePointAt(0)!;
      if (unit < 0xd800 || unit > 0xdfff) return encodeURIComponent(ch);
      return [0xe0 | (unit >> 12), 0x80 | ((unit >> 6) & 0x3f), 0x80 | (unit & 0x3f)].map((b) => `%${b.toString(16).toUpperCase()}`).join('');
    })
    .join('');
}

describe('bad input: a clear error, nothing lost, nothing in flight disturbed', () => {
  // Tools paced at two ticks of 400 ms: the agent must still be running when the flood (its tests'
  // last) lands. At 200 ms it once ended a few seconds into the flood beside the parallel pass, and the
  // rest of the flood was refused `run_closed`.
  const platform = new Platform({ TOOL_PACE_TICKS: '2', TOOL_PACE_MS: '400' });
  const org = uniqueId('acme');
  const other = uniqueId('globex');
  const agentId = uniqueId('inflight-agent');
  const evalId = uniqueId('inflight-eval');
  const agentStart = { command_id: uniqueId('start'), type: 'agent.start', org, run_id: agentId, payload: { goal: 'keep working through the noise', max_steps: AGENT_STEPS } };
  let events: TopicRecord<RunEventEnvelope>[];
  let outcomes: TopicRecord<CommandOutcome>[];
  let dlq: TopicRecord<DlqRecord>[];
  let eventsDlq: TopicRecord<DlqRecord>[];
  let producer: Producer;
  let tablesBefore: string[];
  /** Inject-context command ids accepted for the in-flight agent, with the text of the first decision. */
  const injected = new Map<string, string>();

  const tables = async () => (await platform.query<{ t: string }>(`SELECT table_name AS t FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1`)).map((r) => r.t);
  const outcomesOf = (o: string, commandId: string) => outcomes.filter((r) => r.value.org === o && r.value.command_id === commandId).map((r) => r.value);
  const outcomeOf = async (o: string, commandId: string): Promise<CommandOutcome> =>
    (await waitFor(`the outcome of ${o}/${commandId}`, () => outcomesOf(o, commandId).length > 0 && outcomesOf(o, commandId), 30_000))[0];
  const send = (command: Record<string, unknown> & { run_id: string }) => platform.publishCommand(command);
  const raw = (method: string, path: string, headers: Record<string, string>, body?: Buffer | string) => rawHttp(platform.ports.gateway, method, path, headers, body);
  const json = { 'Content-Type': 'application/json' };
  const eventsOf = async (o: string, runId: string) =>
    (await platform.query<{ event: RunEventEnvelope }>('SELECT event FROM run_events WHERE org = $1 AND run_id = $2 ORDER BY seq', [o, runId])).map((r) => r.event);

  const expectProblem = (res: { status: number; body: { detail?: unknown } }, headers: { get(name: string): string | null } | string, status: number, detail: RegExp, what: unknown) => {
    const contentType = typeof headers === 'string' ? headers : headers.get('content-type');
    expect({ what, status: res.status }).toEqual({ what, status });
    expect({ what, contentType }).toEqual({ what, contentType: expect.stringMatching(/^application\/problem\+json/) });
    expect({ what, detail: res.body.detail }).toEqual({ what, detail: expect.stringMatching(detail) });
  };

  beforeAll(async () => {
    await platform.start();
    events = await platform.follow<RunEventEnvelope>(TOPICS.runEvents);
    outcomes = await platform.follow<CommandOutcome>(TOPICS.commandResults);
    dlq = await platform.follow<DlqRecord>(TOPICS.commandsDlq);
    eventsDlq = await platform.follow<DlqRecord>(TOPICS.runEventsDlq);
    producer = platform.kafka.producer({ allowAutoTopicCreation: false });
    await producer.connect();
    tablesBefore = await tables();

    await send(agentStart);
    const started = await platform.http('POST', '/evals', {
      org,
      body: { run_id: evalId, model: MODEL, suite: SUITE, cases: EVAL_CASES, fail_fraction: 0.25, reviewers: [REVIEWER, "o'brien"] },
    });
    expect(started.status).toBe(202);
    await platform.waitForStatus(org, agentId, 'running');
    await platform.waitForStatus(org, evalId, 'running');
  });
  afterAll(async () => {
    await producer?.disconnect();
    await platform.stop();
  });

  it('an approval of a running eval gets the validator\'s 422; a stranger\'s approval is not_a_reviewer, over HTTP and Kafka', async () => {
    const early = await platform.http('POST', `/runs/${evalId}/approve`, { org, body: { reviewer: REVIEWER } });
    expectProblem(early, early.headers, 422, /^the run is running, not awaiting review$/, 'approve while running');
    expect(early.body.reason).toBe('validator_rejected');
    for (const reviewer of [...SQL, 'mallory 😈']) {
      const res = await platform.http('POST', `/runs/${evalId}/approve`, { org, body: { reviewer } });
      expectProblem(res, res.headers, 422, /is not a reviewer of this run/, reviewer);
      expect(res.body.reason).toBe('not_a_reviewer');
      // The name comes back exactly as sent.
      expect(res.body.detail).toBe(`'${reviewer}' is not a reviewer of this run`);
    }
    const overKafka = uniqueId('c');
    await send({ command_id: overKafka, type: 'eval.approve', org, run_id: evalId, payload: { reviewer: SQL[1] } });
    expect(await outcomeOf(org, overKafka)).toMatchObject({ outcome: 'rejected', reason: 'not_a_reviewer', message: `'${SQL[1]}' is not a reviewer of this run` });
    expect(await platform.statusOf(org, evalId)).toBe('running');
  });

  it('HTTP: malformed JSON, wrong types, unknown fields and bytes that are not UTF-8 get a 400 problem that says what is wrong', async () => {
    const deep = `{"goal":"g","x":${'['.repeat(20_000)}${']'.repeat(20_000)}}`;
    const cases: [string, string, Buffer | string, RegExp][] = [
      ['POST', '/agents', '{"goal": ', /not valid JSON/],
      ['POST', '/agents', "{'goal': 'single quotes'}", /not valid JSON/],
      ['POST', '/agents', '{"goal": "trailing comma",}', /not valid JSON/],
      ['POST', '/agents', 'NaN', /not valid JSON/],
      ['POST', '/agents', '"just a string"', /must be a JSON object/],
      ['POST', '/agents', '[{"goal": "in an array"}]', /must be a JSON object/],
      ['POST', '/agents', 'null', /must be a JSON object/],
      ['POST', '/agents', '{"goal": 42}', /^goal must be string$/],
      ['POST', '/agents', '{"goal": "ok", "max_steps": "many"}', /max_steps must be integer/],
      ['POST', '/agents', '{"goal": "ok", "max_steps": 1.5}', /max_steps must be integer/],
      ['POST', '/agents', '{"goal": "ok", "max_steps": 10001}', /max_steps must be <= 10000/],
      ['POST', '/agents', '{"goal": "ok", "run_id": null}', /run_id must be a string \(got null\)/],
      ['POST', '/agents', '{"goal": "ok", "run_id": 12345}', /run_id must be a string \(got number\)/],
      ['POST', '/agents', '{"goal": "ok", "tier": ["gold"]}', /tier must be one of enterprise, team, batch/],
      ['POST', '/agents', '{"goal": "ok", "snapshots": []}', /snapshots must be object/],
      ['POST', '/agents', '{"goal": "ok", "colour": "red"}', /^unknown field 'colour'$/],
      ['POST', '/agents', '{"goal": "ok", "__proto__": {"admin": true}}', /unknown field '__proto__'/],
      ['POST', '/agents', deep, new RegExp(`^x(\\[0\\])+ is nested more than ${MAX_JSON_DEPTH} levels deep$`)],
      ['POST', '/agents', Buffer.concat([Buffer.from('{"goal": "caf'), Buffer.from([0xe9]), Buffer.from('"}')]), /not valid UTF-8/],
      ['POST', '/evals', '{"model": "m", "suite": "s", "cases": "3"}', /cases must be integer/],
      ['POST', '/evals', '{"model": "m", "suite": "s", "cases": 3, "reviewers": "alice"}', /reviewers must be array/],
      ['POST', '/evals', '{"model": "m", "suite": "s", "cases": 3, "fail_fraction": "half"}', /fail_fraction must be number/],
      ['POST', `/runs/${agentId}/inject-context`, '{"text": ["a", "b"]}', /text must be string/],
      ['POST', `/runs/${agentId}/inject-context`, '{"text": "x", "priority": 1}', /unknown field 'priority'/],
      ['POST', `/runs/${agentId}/pause`, '{"now": true}', /unknown field 'now'/],
      ['POST', `/runs/${agentId}/pause`, '42', /must be a JSON object/],
      ['POST', `/runs/${evalId}/approve`, '{"reviewer": {"name": "alice"}}', /reviewer must be string/],
      ['POST', `/runs/${agentId}/change-goal`, '{"goal": true}', /goal must be string/],
    ];
    for (const [method, path, body, detail] of cases) {
      const res = await raw(method, path, { ...json, 'X-Org': org }, body);
      expectProblem(res, res.contentType, 400, detail, `${path} ${String(body).slice(0, 60)}`);
    }
    // A charset JSON cannot have, and a body that claims to be gzip and is not.
    const latin1 = await raw('POST', '/agents', { 'Content-Type': 'application/json; charset=latin1', 'X-Org': org }, '{"goal":"x"}');
    expectProblem(latin1, latin1.contentType, 415, /unsupported charset "LATIN1"/, 'latin1');
    const gzip = await raw('POST', '/agents', { ...json, 'Content-Encoding': 'gzip', 'X-Org': org }, 'not gzip');
    expectProblem(gzip, gzip.contentType, 400, /header/, 'gzip');
    // None of it started anything.
    expect(await platform.query('SELECT 1 FROM command_ledger WHERE org = $1 AND type = $2', [org, 'agent.start'])).toHaveLength(1);
  });

  it(`HTTP bodies and Kafka commands share one limit of ${MAX_COMMAND_BYTES} bytes: over it is a 413 problem or a too_large DLQ record`, async () => {
    /** A start command whose JSON is exactly `size` bytes; its owner is too long, so it is read and refused, never started. */
    const sized = (size: number) => JSON.stringify({ goal: 'sized', owner: 'o'.repeat(size - JSON.stringify({ goal: 'sized', owner: '' }).length) });
    const atLimit = sized(MAX_COMMAND_BYTES);
    expect(Buffer.byteLength(atLimit)).toBe(MAX_COMMAND_BYTES);
    const read = await raw('POST', '/agents', { ...json, 'X-Org': org }, atLimit);
    expectProblem(read, read.contentType, 400, /owner must NOT have more than 200 characters/, 'at the limit');
    for (const [what, body, headers] of [
      ['one byte over', sized(MAX_COMMAND_BYTES + 1), {}],
      ['10 MB', JSON.stringify({ goal: 'g'.repeat(10 * 1024 * 1024) }), {}],
      ['chunked, no length', sized(100_000), { 'Transfer-Encoding': 'chunked' }],
    ] as const) {
      const res = await raw('POST', '/agents', { ...json, ...headers, 'X-Org': org }, body);
      expectProblem(res, res.contentType, 413, new RegExp(`request body exceeds the ${MAX_COMMAND_BYTES}-byte limit`), what);
      expect(res.body).toMatchObject({ title: 'payload too large', status: 413 });
    }

    const key = uniqueId('size');
    const command = (size: number) => {
      const base = { command_id: uniqueId('sized'), type: 'agent.start', org, run_id: key };
      const shell = JSON.stringify({ ...base, payload: { goal: 'sized', owner: '' } });
      return { id: base.command_id, value: JSON.stringify({ ...base, payload: { goal: 'sized', owner: 'o'.repeat(size - shell.length) } }) };
    };
    const fits = command(MAX_COMMAND_BYTES);
    const over = command(MAX_COMMAND_BYTES + 1);
    expect([Buffer.byteLength(fits.value), Buffer.byteLength(over.value)]).toEqual([MAX_COMMAND_BYTES, MAX_COMMAND_BYTES + 1]);
    await platform.publishCommands([
      { key, value: fits.value },
      { key, value: over.value },
    ]);
    expect(await outcomeOf(org, fits.id)).toMatchObject({ outcome: 'rejected', reason: 'invalid_payload', message: expect.stringMatching(/owner/) });
    const [record] = await waitFor('the too_large record', () => dlq.filter((d) => d.key === key).length > 0 && dlq.filter((d) => d.key === key), 30_000);
    expect(record.value).toMatchObject({ reason: 'too_large', detail: `value is ${MAX_COMMAND_BYTES + 1} bytes; the limit is ${MAX_COMMAND_BYTES}` });
    expect(Buffer.from(record.value.original_base64, 'base64').toString('utf8')).toBe(over.value);
    expect(outcomesOf(org, over.id)).toEqual([]);
  });

  it('Kafka poison (not JSON, not an object, binary, empty, a tombstone, a null key, not UTF-8) goes to the DLQ with its reason and bytes', async () => {
    const key = uniqueId('poison');
    const garbage = Buffer.from([0x00, 0xff, 0xfe, 0x80, 0x81, 0x1b, 0x5b, 0x33, 0x31, 0x6d, 0xc3, 0x28]);
    const poison: { value: Buffer | null; reason: DlqRecord['reason']; detail: RegExp }[] = [
      { value: Buffer.from('{"command_id": "c-1", "type": "agent.pause", org: not json'), reason: 'not_json', detail: /JSON/ },
      { value: Buffer.from('"agent.pause"'), reason: 'not_a_command', detail: /not a JSON object/ },
      { value: Buffer.from('42'), reason: 'not_a_command', detail: /not a JSON object/ },
      { value: Buffer.from('[{"command_id": "c-2"}]'), reason: 'not_a_command', detail: /not a JSON object/ },
      { value: Buffer.from('null'), reason: 'not_a_command', detail: /not a JSON object/ },
      { value: garbage, reason: 'not_json', detail: /not valid UTF-8/ },
      { value: Buffer.alloc(0), reason: 'not_json', detail: /empty/ },
      { value: null, reason: 'not_json', detail: /empty/ },
      { value: Buffer.from(JSON.stringify({ type: 'agent.pause', org, run_id: agentId, payload: {} })), reason: 'not_a_command', detail: /command_id/ },
      { value: Buffer.from(JSON.stringify({ command_id: 'ключ-1', type: 'agent.pause', org, run_id: agentId, payload: {} })), reason: 'not_a_command', detail: /command_id/ },
      { value: Buffer.from(JSON.stringify({ command_id: uniqueId('c'), type: 'agent.pause', org: SQL[0], run_id: agentId, payload: {} })), reason: 'not_a_command', detail: /org/ },
      { value: Buffer.from(JSON.stringify({ command_id: uniqueId('c'), type: 'agent.pause', org: '😀', run_id: agentId, payload: {} })), reason: 'not_a_command', detail: /org/ },
      {
        value: Buffer.concat([Buffer.from(`{"command_id":"${uniqueId('c')}","type":"agent.inject_context","org":"${org}","run_id":"${agentId}","payload":{"text":"caf`), Buffer.from([0xe9]), Buffer.from('"}}')]),
        reason: 'not_json',
        detail: /not valid UTF-8/,
      },
    ];
    // One partition (one key), so the valid command behind the poison proves nothing stalled.
    const after = uniqueId('after-poison');
    await producer.send({
      topic: platform.topic(TOPICS.commands),
      messages: [
        ...poison.map((p) => ({ key, value: p.value })),
        { key, value: JSON.stringify({ command_id: after, type: 'agent.start', org, run_id: key, payload: { goal: 'after the poison', max_steps: 1 } }) },
      ],
    });
    const nullKey = Buffer.from(`null key ${uniqueId('nk')}`);
    await producer.send({ topic: platform.topic(TOPICS.commands), messages: [{ key: null, value: nullKey }] });

    await waitFor('every poison record', () => dlq.filter((d) => d.key === key).length === poison.length, 30_000);
    const records = dlq.filter((d) => d.key === key).map((d) => d.value);
    records.forEach((record, i) => {
      const what = `poison ${i}`;
      expect({ what, reason: record.reason }).toEqual({ what, reason: poison[i].reason });
      expect({ what, detail: record.detail }).toEqual({ what, detail: expect.stringMatching(poison[i].detail) });
      expect({ what, bytes: Buffer.from(record.original_base64, 'base64') }).toEqual({ what, bytes: poison[i].value ?? Buffer.alloc(0) });
      expect(record.source.topic).toBe(platform.topic(TOPICS.commands));
    });
    // In the order they were published: one partition, offsets increasing.
    const offsets = records.map((r) => BigInt(r.source.offset));
    expect(offsets).toEqual([...offsets].sort((a, b) => (a < b ? -1 : 1)));
    const [nullKeyed] = await waitFor('the null-key record', () => {
      const found = dlq.filter((d) => d.value.original_base64 === nullKey.toString('base64'));
      return found.length > 0 && found;
    }, 30_000);
    expect(nullKeyed).toMatchObject({ key: '', value: { reason: 'not_json' } });

    expect(await outcomeOf(org, after)).toMatchObject({ outcome: 'accepted' });
    await platform.waitForStatus(org, key, 'done');
    // Nothing poisoned reached the ledger.
    expect(await platform.query(`SELECT 1 FROM command_ledger WHERE command_id IN ('c-1', 'c-2', 'ключ-1')`)).toHaveLength(0);
  });

  it('Kafka: a readable but wrong command gets one rejected outcome with its reason and message, never the DLQ', async () => {
    const cases: { command: Record<string, unknown>; reason: string; message: RegExp; runId?: string; deep?: boolean }[] = [
      { command: { type: 'agent.explode', run_id: agentId, payload: {} }, reason: 'unknown_type', message: /unknown command type 'agent.explode'/ },
      { command: { type: "'; DROP TABLE runs; --", run_id: agentId, payload: {} }, reason: 'unknown_type', message: /unknown command type/ },
      { command: { type: 'agent.💥', run_id: agentId, payload: {} }, reason: 'unknown_type', message: /unknown command type/ },
      { command: { type: 42, run_id: agentId, payload: {} }, reason: 'invalid_payload', message: /type must be string/ },
      { command: { type: 'agent.pause', run_id: SQL[0], payload: {} }, reason: 'invalid_payload', message: /run_id must match/, runId: '' },
      { command: { type: 'agent.pause', run_id: '🏃', payload: {} }, reason: 'invalid_payload', message: /run_id must match/, runId: '' },
      { command: { type: 'agent.pause', run_id: agentId, payload: 'now' }, reason: 'invalid_payload', message: /payload must be object/ },
      { command: { type: 'agent.pause', run_id: agentId }, reason: 'invalid_payload', message: /payload/ },
      { command: { type: 'agent.start', run_id: uniqueId('r'), payload: { goal: 'ok', max_steps: '10' } }, reason: 'invalid_payload', message: /payload.max_steps must be integer/ },
      // Written out by hand below: JSON.stringify itself overflows the stack on it.
      { command: { type: 'agent.inject_context', run_id: agentId, payload: { text: '<deep>' } }, reason: 'invalid_payload', message: /^payload.text(\[0\])+ is nested more than 64 levels deep$/, deep: true },
      ...ILLEGAL.map((text) => ({ command: { type: 'agent.inject_context', run_id: agentId, payload: { text } }, reason: 'invalid_payload', message: /payload.text contains a NUL character or a lone surrogate/ })),
      ...ILLEGAL.map((goal) => ({ command: { type: 'agent.start', run_id: uniqueId('r'), payload: { goal, owner: 'o' } }, reason: 'invalid_payload', message: /payload.goal contains/ })),
      ...ILLEGAL.map((owner) => ({ command: { type: 'agent.start', run_id: uniqueId('r'), payload: { goal: 'g', owner } }, reason: 'invalid_payload', message: /payload.owner contains/ })),
      ...ILLEGAL.map((reviewer) => ({ command: { type: 'eval.approve', run_id: evalId, payload: { reviewer } }, reason: 'invalid_payload', message: /payload.reviewer contains/ })),
      ...ILLEGAL.map((goal) => ({ command: { type: 'agent.change_goal', run_id: agentId, payload: { goal } }, reason: 'invalid_payload', message: /payload.goal contains/ })),
      ...ILLEGAL.map((model) => ({ command: { type: 'eval.start', run_id: uniqueId('e'), payload: { model, suite: 's', cases: 1 } }, reason: 'invalid_payload', message: /payload.model contains/ })),
    ];
    const ids = cases.map(() => uniqueId('wrong'));
    // Key them by the in-flight agent: they share its partition with everything it is sent.
    const deepArray = `${'['.repeat(20_000)}"deep"${']'.repeat(20_000)}`;
    await platform.publishCommands(
      cases.map((c, i) => {
        const value = JSON.stringify({ command_id: ids[i], org, ...c.command });
        return { key: agentId, value: c.deep ? value.replace('"<deep>"', deepArray) : value };
      }),
    );
    for (const [i, c] of cases.entries()) {
      const outcome = await outcomeOf(org, ids[i]);
      const what = JSON.stringify(c.command).slice(0, 80);
      expect({ what, outcome: outcome.outcome, reason: outcome.reason }).toEqual({ what, outcome: 'rejected', reason: c.reason });
      expect({ what, message: outcome.message }).toEqual({ what, message: expect.stringMatching(c.message) });
      // A malformed run id is never echoed.
      expect(outcome.run_id).toBe(c.runId ?? c.command.run_id);
      expect(outcomesOf(org, ids[i])).toHaveLength(1);
    }
    expect(dlq.filter((d) => d.key === agentId)).toEqual([]);
    const ledger = await platform.query<{ command_id: string; outcome: string }>('SELECT command_id, outcome FROM command_ledger WHERE command_id = ANY($1)', [ids]);
    expect(ledger).toHaveLength(ids.length);
    expect(new Set(ledger.map((r) => r.outcome))).toEqual(new Set(['rejected']));
  });

  it("an unknown run id and another org's run are the same 404 over HTTP and the same unknown_run over Kafka", async () => {
    const nobody = uniqueId('nobody');
    const bodies: Record<string, unknown> = { pause: {}, resume: {}, cancel: {}, 'inject-context': { text: 'hi' }, 'change-goal': { goal: 'take over' }, approve: { reviewer: REVIEWER }, 'retry-failed': {} };
    /** What the other org is told on every route, with the run id blanked out. */
    const answersFor = async (runId: string): Promise<string[]> => {
      const answers: string[] = [];
      for (const [method, path, body] of [
        ['GET', `/runs/${runId}`, undefined],
        ['GET', `/runs/${runId}/events`, undefined],
        ['GET', `/runs/${runId}/snapshots`, undefined],
        ...Object.entries(bodies).map(([action, b]) => ['POST', `/runs/${runId}/${action}`, b] as const),
      ] as const) {
        const res = await platform.http(method, path, { org: other, body });
        expectProblem(res, res.headers, 404, /./, `${other} ${method} ${path}`);
        expect(JSON.stringify(res.body)).not.toContain(org);
        answers.push(`${res.status} ${method} ${path}: ${JSON.stringify({ ...res.body, command_id: undefined })}`.replaceAll(runId, '<id>'));
      }
      return answers;
    };
    // Word for word what a run that does not exist gets.
    const nobodyAnswers = await answersFor(nobody);
    expect(await answersFor(agentId)).toEqual(nobodyAnswers);
    expect(await answersFor(evalId)).toEqual(nobodyAnswers);

    // Over Kafka: every control type, for the other org's runs and for no run at all.
    const types = { 'agent.pause': {}, 'agent.cancel': {}, 'agent.inject_context': { text: 'hi' }, 'agent.change_goal': { goal: 'mine now' }, 'eval.approve': { reviewer: REVIEWER }, 'eval.cancel': {}, 'eval.retry_failed': {} };
    for (const [type, payload] of Object.entries(types)) {
      const messages: Record<string, string> = {};
      for (const runId of [type.startsWith('agent') ? agentId : evalId, nobody]) {
        const commandId = uniqueId('foreign');
        await send({ command_id: commandId, type, org: other, run_id: runId, payload });
        const outcome = await outcomeOf(other, commandId);
        expect({ type, runId, outcome: outcome.outcome, reason: outcome.reason }).toEqual({ type, runId, outcome: 'rejected', reason: 'unknown_run' });
        expect(JSON.stringify(outcome)).not.toContain(org);
        messages[runId === nobody ? 'nobody' : 'foreign'] = JSON.stringify({ ...outcome, command_id: undefined, ts: undefined }).replaceAll(runId, '<id>');
      }
      expect(messages.foreign).toBe(messages.nobody);
    }
    // A command id the first org already used is a new command in another org, not a `duplicate`.
    await send({ ...agentStart, org: other, payload: { goal: 'same id, other org', max_steps: 1 } });
    expect(await outcomeOf(other, agentStart.command_id)).toMatchObject({ outcome: 'accepted', org: other });
    await platform.waitForStatus(other, agentId, 'done');
    expect((await platform.http('GET', '/runs?limit=200', { org: other })).body.runs.map((r: { run_id: string }) => r.run_id)).toEqual([agentId]);
    expect(await platform.statusOf(org, evalId)).not.toBe('cancelled');
  });

  it('SQL-looking and unicode strings in every GET /runs filter get a 400 with a message or an exact match, never a 500', async () => {
    const values = [...LEGAL, ...ILLEGAL.slice(0, 1)];
    const undecodable = ['%ED%A0%80', '%FF', '%'];
    for (const filter of ['kind', 'status', 'cursor', 'limit']) {
      for (const value of [...values.map(encode), ...undecodable]) {
        const res = await platform.http('GET', `/runs?${filter}=${value}`, { org });
        expectProblem(res, res.headers, 400, new RegExp(filter), `${filter}=${value}`);
      }
    }
    // Exact: no normalisation, no trimming, no prefix match.
    for (const value of [...LEGAL, `${MODEL} `, MODEL.slice(0, -2), MODEL.toUpperCase().replace('模', '模\u0301')]) {
      const res = await platform.http('GET', `/runs?model=${encode(value)}`, { org });
      expect({ value, status: res.status }).toEqual({ value, status: 200 });
      expect(res.body.runs).toEqual([]);
    }
    for (const value of ['%00', 'a%00b', '%00%00']) {
      const res = await platform.http('GET', `/runs?model=${value}`, { org });
      expectProblem(res, res.headers, 400, /model contains a NUL character/, value);
    }
    // Undecodable escapes are read as the literal text, which no run has.
    for (const value of undecodable) expect((await platform.http('GET', `/runs?model=${value}`, { org })).body.runs).toEqual([]);
    const exact = await platform.http('GET', `/runs?model=${encode(MODEL)}&kind=eval`, { org });
    expect(exact.body.runs.map((r: { run_id: string; model: string }) => [r.run_id, r.model])).toEqual([[evalId, MODEL]]);
    // Characters, not UTF-16 units: 200 emoji are 200 characters.
    expect((await platform.http('GET', `/runs?model=${encode('😀'.repeat(200))}`, { org })).status).toBe(200);
    const tooLong = await platform.http('GET', `/runs?model=${encode('😀'.repeat(201))}`, { org });
    expectProblem(tooLong, tooLong.headers, 400, /model must be 1-200 characters/, '201 emoji');
    for (const [query, detail] of [
      ['limit=0', /limit/],
      ['limit=201', /limit/],
      ['limit=-1', /limit/],
      ['limit=1.5', /limit/],
      ['limit=1e400', /limit/],
      ['status=done&status=failed', /status may be given once/],
      ['model=a&model=b', /model may be given once/],
    ] as const) {
      const res = await platform.http('GET', `/runs?${query}`, { org });
      expectProblem(res, res.headers, 400, detail, query);
    }
  });

  it('SQL-looking and unicode strings in every command field are stored exactly or refused with a message, and the tables are intact', async () => {
    // goal and owner, over HTTP and over Kafka: one short run per string and path.
    const started: { runId: string; text: string }[] = [];
    for (const [i, text] of LEGAL.entries()) {
      const viaHttp = `uni-http-${i}`;
      const res = await platform.http('POST', '/agents', { org, body: { run_id: viaHttp, goal: text, owner: text, max_steps: 1 } });
      expect({ text, status: res.status }).toEqual({ text, status: 202 });
      const viaKafka = `uni-kafka-${i}`;
      await send({ command_id: uniqueId('uni'), type: 'agent.start', org, run_id: viaKafka, payload: { goal: text, owner: text, max_steps: 1 } });
      started.push({ runId: viaHttp, text }, { runId: viaKafka, text });
    }
    // An eval whose every text field is unicode, over Kafka, approved by its unicode reviewer.
    const uniEval = uniqueId('uni-eval');
    await send({ command_id: uniqueId('uni'), type: 'eval.start', org, run_id: uniEval, payload: { model: UNICODE[3], suite: SQL[1], case_ids: UNICODE, fail_fraction: 0, reviewers: [UNICODE[1]] } });

    // text, through the in-flight agent; illegal text and goals refused at the boundary.
    for (const text of LEGAL) {
      const key = uniqueId('inject');
      const res = await platform.http('POST', `/runs/${agentId}/inject-context`, { org, body: { text }, headers: { 'Idempotency-Key': key } });
      expect({ text, status: res.status, outcome: res.body.outcome }).toEqual({ text, status: 202, outcome: 'accepted' });
      injected.set(key, text);
    }
    for (const value of ILLEGAL) {
      for (const [path, body, field] of [
        ['/agents', { goal: value }, 'goal'],
        ['/agents', { goal: 'g', owner: value }, 'owner'],
        [`/runs/${agentId}/inject-context`, { text: value }, 'text'],
        [`/runs/${agentId}/change-goal`, { goal: value }, 'goal'],
        [`/runs/${evalId}/approve`, { reviewer: value }, 'reviewer'],
        ['/evals', { model: value, suite: 's', cases: 1 }, 'model'],
        ['/evals', { model: 'm', suite: 's', cases: 1, reviewers: ['ok', value] }, 'reviewers\\[1\\]'],
      ] as const) {
        const res = await platform.http('POST', path, { org, body });
        expectProblem(res, res.headers, 400, new RegExp(`^${field} contains a NUL character or a lone surrogate$`), `${path} ${field}`);
      }
    }
    // run_id (the path and the body), org (X-Org), command_id (Idempotency-Key).
    for (const value of [...LEGAL, ...ILLEGAL]) {
      // A lone surrogate's bytes do not even decode as a path parameter.
      const inPath = await platform.http('GET', `/runs/${encode(value)}`, { org });
      expectProblem(inPath, inPath.headers, 400, /run id must match|Failed to decode param/, `path ${value}`);
      const control = await platform.http('POST', `/runs/${encode(value)}/pause`, { org, body: {} });
      expectProblem(control, control.headers, 400, /run id must match|Failed to decode param/, `control ${value}`);
      const inBody = await platform.http('POST', '/agents', { org, body: { run_id: value, goal: 'g' } });
      expectProblem(inBody, inBody.headers, 400, /run id must match/, `body ${value}`);
      // Node's client will not put a NUL in a header at all.
      if (value.includes('\u0000')) continue;
      const asOrg = await raw('GET', '/runs', { 'X-Org': Buffer.from(value, 'utf8').toString('latin1') });
      expectProblem(asOrg, asOrg.contentType, 400, /X-Org must match/, `X-Org ${value}`);
    }
    for (const value of [...UNICODE, ...SQL]) {
      const res = await raw('POST', `/runs/${agentId}/pause`, { ...json, 'X-Org': org, 'Idempotency-Key': Buffer.from(value, 'utf8').toString('latin1') }, '{}');
      expectProblem(res, res.contentType, 400, /Idempotency-Key must be 1-128 printable ASCII characters/, `key ${value}`);
    }
    // A printable-ASCII key is a command id like any other, stored as sent.
    for (const value of SQL_IDS) {
      const res = await platform.http('POST', `/runs/${agentId}/inject-context`, { org, body: { text: `key ${value}` }, headers: { 'Idempotency-Key': value } });
      expect({ value, status: res.status, body: res.body }).toEqual({ value, status: 202, body: { command_id: value, run_id: agentId, outcome: 'accepted' } });
      injected.set(value, `key ${value}`);
    }
    const stored = await platform.query<{ command_id: string }>('SELECT command_id FROM command_ledger WHERE org = $1 AND command_id = ANY($2)', [org, SQL_IDS]);
    expect(stored.map((r) => r.command_id).sort()).toEqual([...SQL_IDS].sort());

    for (const { runId, text } of started) {
      await platform.waitForStatus(org, runId, 'done');
      const run = await platform.http('GET', `/runs/${runId}`, { org });
      expect({ runId, goal: run.body.state.goal, owner: run.body.state.owner }).toEqual({ runId, goal: text, owner: text });
      expect(run.body.last_events[0].payload.state.goal).toBe(text);
    }
    await platform.waitForStatus(org, uniEval, 'awaiting_review');
    const approve = uniqueId('uni');
    await send({ command_id: approve, type: 'eval.approve', org, run_id: uniEval, payload: { reviewer: UNICODE[1] } });
    expect(await outcomeOf(org, approve)).toMatchObject({ outcome: 'accepted', message: `approved by ${UNICODE[1]}` });
    await platform.waitForStatus(org, uniEval, 'published');
    const evalRun = await platform.http('GET', `/runs/${uniEval}`, { org });
    expect(evalRun.body).toMatchObject({ model: UNICODE[3], state: { model: UNICODE[3], suite: SQL[1], reviewers: [UNICODE[1]], approved_by: UNICODE[1] } });
    expect(Object.keys(evalRun.body.state.cases).sort()).toEqual([...UNICODE].sort());

    expect(await tables()).toEqual(tablesBefore);
    const [counts] = await platform.query<{ runs: string; events: string }>('SELECT (SELECT count(*) FROM runs) AS runs, (SELECT count(*) FROM run_events) AS events');
    expect(Number(counts.runs)).toBeGreaterThanOrEqual(started.length + 3);
    expect(Number(counts.events)).toBeGreaterThan(0);
  });

  it('forged, tampered, foreign, garbage and huge cursors are a 400; a real one pages', async () => {
    const first = await platform.http('GET', '/runs?limit=2', { org });
    expect(first.status).toBe(200);
    const cursor: string = first.body.next_cursor;
    expect(cursor).toEqual(expect.any(String));
    const next = await platform.http('GET', `/runs?limit=2&cursor=${encodeURIComponent(cursor)}`, { org });
    expect(next.status).toBe(200);
    expect(next.body.runs).toHaveLength(2);
    expect(next.body.runs[0].run_id).not.toBe(first.body.runs[0].run_id);

    const [body, signature] = cursor.split('.');
    const flip = (text: string, at: number) => text.slice(0, at) + (text[at] === 'A' ? 'B' : 'A') + text.slice(at + 1);
    const forgedBody = Buffer.from(JSON.stringify(['2999-01-01T00:00:00.000Z', 'zzz', org])).toString('base64url');
    // Another org's genuine cursor: it has two runs (its start above and one more).
    await platform.http('POST', '/agents', { org: other, body: { run_id: uniqueId('second'), goal: 'a second run', max_steps: 1 } });
    const foreign: string = (await waitFor('a cursor of the other org', async () => (await platform.http('GET', '/runs?limit=1', { org: other })).body.next_cursor ?? undefined))!;
    const bad: [string, string, RegExp][] = [
      ['a flipped byte in the body', `${flip(body, 5)}.${signature}`, /not issued by this server or has been altered/],
      ['a flipped byte in the signature', `${body}.${flip(signature, 3)}`, /not issued by this server or has been altered/],
      ['a forged body with the real signature', `${forgedBody}.${signature}`, /not issued by this server or has been altered/],
      ["another org's cursor", foreign, /not issued to this org/],
      ['base64 garbage', `${Buffer.from('garbage!').toString('base64')}.${Buffer.from('nope').toString('base64')}`, /not issued by this server/],
      ['no signature', body, /malformed/],
      ['three parts', `${cursor}.x`, /malformed/],
      ['SQL', SQL[0], /malformed/],
      ['huge (12 KiB)', `${'A'.repeat(12 * 1024)}.${signature}`, /not issued by this server/],
    ];
    for (const [what, value, detail] of bad) {
      const res = await platform.http('GET', `/runs?cursor=${encodeURIComponent(value)}`, { org });
      expectProblem(res, res.headers, 400, detail, what);
      expect(res.body.detail).toMatch(/start again without a cursor/);
    }
    // Past Node's 16 KiB header limit the server answers 431 itself, before any code of ours, and
    // closes the connection: a client still writing the request may see the reset instead.
    const huge = await raw('GET', `/runs?cursor=${'A'.repeat(64 * 1024)}`, { 'X-Org': org }).then(
      (r) => r.status,
      (err: NodeJS.ErrnoException) => err.code,
    );
    expect([431, 'ECONNRESET', 'EPIPE']).toContain(huge);
    // The foreign cursor still works for its own org.
    expect((await platform.http('GET', `/runs?cursor=${encodeURIComponent(foreign)}`, { org: other })).status).toBe(200);
  });

  it('a replayed command id is a duplicate whatever its payload says, and the first decision stands', async () => {
    // The in-flight agent's own start, replayed with another goal: a duplicate, no second run.
    await send({ ...agentStart, payload: { goal: 'hijacked', max_steps: 1 } });
    await waitFor('the replayed start', () => outcomesOf(org, agentStart.command_id).length === 2, 30_000);
    expect(outcomesOf(org, agentStart.command_id).map((o) => o.outcome)).toEqual(['accepted', 'duplicate']);

    // Over Kafka: the same id with another text, then as another type.
    const id = uniqueId('replay');
    await send({ command_id: id, type: 'agent.inject_context', org, run_id: agentId, payload: { text: 'the first text' } });
    await send({ command_id: id, type: 'agent.inject_context', org, run_id: agentId, payload: { text: 'the second text' } });
    await send({ command_id: id, type: 'agent.pause', org, run_id: agentId, payload: {} });
    await waitFor('three outcomes', () => outcomesOf(org, id).length === 3, 30_000);
    expect(outcomesOf(org, id).map((o) => o.outcome)).toEqual(['accepted', 'duplicate', 'duplicate']);
    expect(outcomesOf(org, id)[2].message).toBe(`command ${id} was already accepted`);
    injected.set(id, 'the first text');

    // A rejected command stays rejected: the same id with a valid payload does not apply.
    const rejected = uniqueId('replay');
    await send({ command_id: rejected, type: 'agent.inject_context', org, run_id: agentId, payload: { text: '' } });
    await send({ command_id: rejected, type: 'agent.inject_context', org, run_id: agentId, payload: { text: 'now valid' } });
    await waitFor('two outcomes', () => outcomesOf(org, rejected).length === 2, 30_000);
    expect(outcomesOf(org, rejected).map((o) => [o.outcome, o.reason])).toEqual([
      ['rejected', 'invalid_payload'],
      ['duplicate', undefined],
    ]);
    expect(outcomesOf(org, rejected)[1].message).toBe(`command ${rejected} was already rejected (invalid_payload)`);

    // Over HTTP: Idempotency-Key reused with another body.
    const key = uniqueId('replay-key');
    const first = await platform.http('POST', `/runs/${agentId}/inject-context`, { org, headers: { 'Idempotency-Key': key }, body: { text: 'http first' } });
    const second = await platform.http('POST', `/runs/${agentId}/inject-context`, { org, headers: { 'Idempotency-Key': key }, body: { text: 'http second' } });
    const asPause = await platform.http('POST', `/runs/${agentId}/pause`, { org, headers: { 'Idempotency-Key': key }, body: {} });
    expect([first.body.outcome, second.body.outcome, asPause.body.outcome]).toEqual(['accepted', 'duplicate', 'duplicate']);
    expect([first.status, second.status, asPause.status]).toEqual([202, 202, 202]);
    injected.set(key, 'http first');

    await waitFor('the first texts in the read model', async () => {
      const texts = (await eventsOf(org, agentId)).filter((e) => e.type === 'context_injected').map((e) => e.payload.text);
      return texts.includes('the first text') && texts.includes('http first');
    }, 30_000);
    const texts = (await eventsOf(org, agentId)).filter((e) => e.type === 'context_injected').map((e) => e.payload.text);
    for (const never of ['the second text', 'now valid', 'http second']) expect(texts).not.toContain(never);
    expect((await eventsOf(org, agentId)).filter((e) => e.type === 'run_started')).toHaveLength(1);
    expect(await platform.statusOf(org, agentId)).toBe('running');
  });

  it('Updates with invalid arguments: 400 at the boundary, the validator\'s 422, and a goal counted in characters', async () => {
    for (const [goal, detail] of [
      ['', /goal must NOT have fewer than 1 characters/],
      ['   \t\n ', /goal must match pattern/],
      ['x'.repeat(8_001), /goal must NOT have more than 8000 characters/],
      ['😀'.repeat(8_001), /goal must NOT have more than 8000 characters/],
    ] as const) {
      const res = await platform.http('POST', `/runs/${agentId}/change-goal`, { org, body: { goal } });
      expectProblem(res, res.headers, 400, detail, `goal of ${goal.length} units`);
    }
    for (const [body, detail] of [
      [{}, /must have required property 'goal'/],
      [{ goal: 'g', extra: 1 }, /^unknown field 'extra'$/],
      [{ goal: ['a list'] }, /^goal must be string$/],
    ] as const) {
      const res = await platform.http('POST', `/runs/${agentId}/change-goal`, { org, body });
      expectProblem(res, res.headers, 400, detail, body);
    }
    // A scratch run takes the goals that are accepted, so the in-flight agent keeps its own.
    const scratch = uniqueId('scratch');
    await platform.http('POST', '/agents', { org, body: { run_id: scratch, goal: 'scratch', max_steps: 400 } });
    await platform.waitForStatus(org, scratch, 'running');
    // 8,000 characters of four bytes each: 16,000 UTF-16 units. The boundary and the validator agree.
    const astral = '𝒜'.repeat(8_000);
    const key = uniqueId('goal');
    const changed = await platform.http('POST', `/runs/${scratch}/change-goal`, { org, headers: { 'Idempotency-Key': key }, body: { goal: astral } });
    expect({ status: changed.status, outcome: changed.body.outcome }).toEqual({ status: 202, outcome: 'accepted' });
    expect(changed.body.message).toBe(`goal changed from 'scratch' to '${astral}'`);
    const replay = await platform.http('POST', `/runs/${scratch}/change-goal`, { org, headers: { 'Idempotency-Key': key }, body: { goal: 'replayed' } });
    expect(replay.body.outcome).toBe('duplicate');
    await waitFor('the new goal in the read model', async () => (await platform.http('GET', `/runs/${scratch}`, { org })).body.state?.goal === astral, 30_000);
    expect((await eventsOf(org, scratch)).filter((e) => e.type === 'goal_changed')).toHaveLength(1);

    // Closed: the validator is not reached, the run is.
    expect((await platform.http('POST', `/runs/${scratch}/cancel`, { org, body: {} })).status).toBe(202);
    await platform.waitForStatus(org, scratch, 'cancelled');
    const late = await platform.http('POST', `/runs/${scratch}/change-goal`, { org, body: { goal: 'too late' } });
    expectProblem(late, late.headers, 409, /has already ended \(cancelled\)/, 'closed');
    // An agent run is not an eval: approving it is a wrong_kind, not a validator call.
    const wrongKind = await platform.http('POST', `/runs/${agentId}/approve`, { org, body: { reviewer: REVIEWER } });
    expectProblem(wrongKind, wrongKind.headers, 409, /is not an eval run/, 'wrong kind');
    expect((await platform.http('GET', `/runs/${agentId}`, { org })).body.state.goal).toBe(agentStart.payload.goal);
  });

  it('a poison run event goes to the run-events DLQ and the projector keeps projecting the partition behind it', async () => {
    const base = { run_id: 'ghost', org: 'probe', kind: 'agent', type: 'step_completed', ts: new Date().toISOString(), payload: {} };
    const poison: { value: Buffer; detail: RegExp }[] = [
      { value: Buffer.from('not json at all'), detail: /not JSON/ },
      { value: Buffer.from([0xc3, 0x28, 0xff]), detail: /not UTF-8/ },
      { value: Buffer.from(JSON.stringify({ ...base, seq: 0 })), detail: /seq must be >= 1/ },
      { value: Buffer.from(JSON.stringify({ ...base, seq: 1, org: SQL[1] })), detail: /org must match/ },
      { value: Buffer.from(JSON.stringify({ ...base, seq: 1, payload: { note: 'nul \u0000' } })), detail: /payload.note contains a NUL/ },
      { value: Buffer.from(JSON.stringify({ ...base, seq: 1 }).replace('"payload":{}', `"payload":{"x":${'['.repeat(30_000)}${']'.repeat(30_000)}}`)), detail: /payload.x.* nested more than 64 levels/ },
      // Valid by the schema; Postgres refuses year 0 (a data exception): dead-lettered alone.
      { value: Buffer.from(JSON.stringify({ ...base, seq: 1, ts: '0000-01-01T00:00:00Z' })), detail: /out of range/ },
    ];
    const lastSeqBefore = (await platform.query<{ last_seq: number }>('SELECT last_seq FROM runs WHERE org = $1 AND run_id = $2', [org, agentId]))[0].last_seq;
    // Keyed by the in-flight agent, so they sit in its partition, among its own events. Signed with the
    // platform's key: what is tested here is reading, past the signature check (event-auth.e2e.ts tests that).
    await platform.publishRunEvents([...poison.map((p) => ({ key: agentId, value: p.value })), { key: agentId, value: JSON.stringify({ ...base, seq: 1, payload: { note: 'after the poison 🚀' } }) }]);
    await waitFor('every poison event dead-lettered', () => eventsDlq.filter((d) => d.key === agentId).length === poison.length, 30_000);
    const records = eventsDlq.filter((d) => d.key === agentId).map((d) => d.value);
    const byBytes = new Map(records.map((r) => [r.original_base64, r]));
    for (const [i, p] of poison.entries()) {
      const record = byBytes.get(p.value.toString('base64'));
      expect({ i, reason: record?.reason }).toEqual({ i, reason: 'not_an_event' });
      expect({ i, detail: record?.detail }).toEqual({ i, detail: expect.stringMatching(p.detail) });
      expect(record?.source.topic).toBe(platform.topic(TOPICS.runEvents));
    }
    await waitFor('the valid event behind the poison', async () => (await eventsOf('probe', 'ghost')).length === 1, 30_000);
    expect((await eventsOf('probe', 'ghost'))[0].payload).toEqual({ note: 'after the poison 🚀' });
    await waitFor('the agent still projected', async () => {
      const [row] = await platform.query<{ last_seq: number }>('SELECT last_seq FROM runs WHERE org = $1 AND run_id = $2', [org, agentId]);
      return row.last_seq > lastSeqBefore;
    }, 30_000);
  });

  it('a flood of 300 commands for the in-flight agent, some repeated: one outcome each, applied once, and the run goes on', async () => {
    expect(await platform.statusOf(org, agentId)).toBe('running');
    const messages: { command_id: string; type: string; payload: Record<string, unknown> }[] = [];
    const distinct: { command_id: string; type: string; payload: Record<string, unknown> }[] = [];
    for (let i = 0; messages.length < 299; i++) {
      if (i % 10 === 9 && distinct.length > 3) {
        // A repeat of an earlier command, half of them with another payload.
        const earlier = distinct[(i * 7) % distinct.length];
        messages.push(earlier.type === 'agent.inject_context' && i % 20 === 9 ? { ...earlier, payload: { text: `${earlier.payload.text as string} (changed)` } } : earlier);
        continue;
      }
      const type = i % 10 === 3 ? 'agent.pause' : i % 10 === 6 ? 'agent.resume' : 'agent.inject_context';
      const command = { command_id: uniqueId(`flood-${i}`), type, payload: type === 'agent.inject_context' ? { text: `flood ${i} 🌊` } : {} };
      distinct.push(command);
      messages.push(command);
    }
    // The last word is a resume, so the run goes on.
    const last = { command_id: uniqueId('flood-last'), type: 'agent.resume', payload: {} };
    distinct.push(last);
    messages.push(last);
    expect(messages).toHaveLength(300);
    for (let i = 0; i < messages.length; i += 50) {
      await platform.publishCommands(messages.slice(i, i + 50).map((m) => ({ key: agentId, value: JSON.stringify({ ...m, org, run_id: agentId }) })));
    }
    const sent = new Map<string, number>();
    for (const m of messages) sent.set(m.command_id, (sent.get(m.command_id) ?? 0) + 1);
    await waitFor('an outcome for every message', () => [...sent].every(([id, n]) => outcomesOf(org, id).length >= n), 180_000);
    for (const [id, n] of sent) {
      const records = outcomes.filter((r) => r.value.org === org && r.value.command_id === id);
      const got = records.map((r) => (r.value.reason ? `${r.value.outcome}: ${r.value.reason}` : r.value.outcome));
      // Where each outcome sits on the topic, and when it was decided: on a failure, whether a record was
      // written twice (two positions) and by which decision.
      const where = records.map((r) => `${r.partition}@${r.offset} ${r.value.ts}`);
      expect({ id, got, where }).toEqual({ id, got: ['accepted', ...Array<string>(n - 1).fill('duplicate')], where });
    }
    for (const command of distinct) if (command.type === 'agent.inject_context') injected.set(command.command_id, command.payload.text as string);
    expect(dlq.filter((d) => d.key === agentId)).toEqual([]);
  });

  it('the runs in flight end as they would have: terminal status, seqs 1..N once each, every inject applied once, every effect once', async () => {
    await platform.waitForStatus(org, agentId, 'done', 180_000);
    await platform.waitForStatus(org, evalId, 'awaiting_review', 120_000);
    const approved = await platform.http('POST', `/runs/${evalId}/approve`, { org, body: { reviewer: REVIEWER } });
    expect({ status: approved.status, message: approved.body.message }).toEqual({ status: 202, message: `approved by ${REVIEWER}` });
    await platform.waitForStatus(org, evalId, 'published');

    for (const runId of [agentId, evalId]) {
      const [row] = await platform.query<{ last_seq: number; n: string; distinct_seqs: string }>(
        `SELECT r.last_seq, (SELECT count(*) FROM run_events e WHERE e.org = r.org AND e.run_id = r.run_id) AS n,
                (SELECT count(DISTINCT seq) FROM run_events e WHERE e.org = r.org AND e.run_id = r.run_id) AS distinct_seqs
         FROM runs r WHERE r.org = $1 AND r.run_id = $2`,
        [org, runId],
      );
      const stored = (await eventsOf(org, runId)).map((e) => e.seq);
      expect({ runId, stored }).toEqual({ runId, stored: oneToN(row.last_seq) });
      expect([Number(row.n), Number(row.distinct_seqs)]).toEqual([row.last_seq, row.last_seq]);
      await waitFor(`every event of ${runId} on the topic`, () => seqsOnTopic(events, org, runId).length === row.last_seq, 30_000);
      expect(seqsOnTopic(events, org, runId)).toEqual(oneToN(row.last_seq));
      // Stored events are the very ones published.
      const onTopic = new Map(events.filter((e) => e.value.org === org && e.value.run_id === runId).map((e) => [e.value.seq, e.value]));
      for (const event of await eventsOf(org, runId)) expect(event).toEqual(onTopic.get(event.seq));
    }

    const agentEvents = await eventsOf(org, agentId);
    const [agent] = await platform.query<{ state: { step: number; goal: string; status: string } }>('SELECT state FROM runs WHERE org = $1 AND run_id = $2', [org, agentId]);
    expect(agent.state).toMatchObject({ status: 'done', step: AGENT_STEPS, goal: agentStart.payload.goal });
    expect(agentEvents.filter((e) => e.type === 'run_started')).toHaveLength(1);
    expect(agentEvents.filter((e) => e.type === 'step_completed')).toHaveLength(AGENT_STEPS);
    const injections = agentEvents.filter((e) => e.type === 'context_injected').map((e) => [e.payload.command_id, e.payload.text]);
    expect(injections.length).toBe(injected.size);
    expect(new Map(injections as [string, string][])).toEqual(injected);
    const [{ n: effects }] = await platform.query<{ n: string }>('SELECT count(*) AS n FROM effect_ledger WHERE starts_with(idempotency_key, $1)', [`${org}/${agentId}:`]);
    expect(Number(effects)).toBe(scriptedRunShape(AGENT_STEPS).effects);
    expect(await platform.query('SELECT 1 FROM gpu_leases')).toEqual([]);

    const evalEvents = await eventsOf(org, evalId);
    const finished = evalEvents.filter((e) => e.type === 'case_finished').map((e) => e.payload.case_id as string);
    expect(finished).toHaveLength(EVAL_CASES);
    expect(new Set(finished).size).toBe(EVAL_CASES);
    const [evalRow] = await platform.query<{ state: Record<string, unknown> }>('SELECT state FROM runs WHERE org = $1 AND run_id = $2', [org, evalId]);
    expect(evalRow.state).toMatchObject({ status: 'published', approved_by: REVIEWER, model: MODEL, suite: SUITE, reviewers: [REVIEWER, "o'brien"], total: EVAL_CASES });
    expect(await tables()).toEqual(tablesBefore);
  });
});
