import { MAX_COMMAND_BYTES, MAX_JSON_DEPTH, normaliseOrg, ORG_PATTERN } from './names';
import { checkCommand, readCommand, readRunEvent } from './validation';

const valid = { command_id: 'c-1', type: 'agent.start', org: 'acme', run_id: 'agent-42', payload: { goal: 'find the bug' } };
const bytes = (value: unknown) => Buffer.from(JSON.stringify(value));

describe('reading a command off the wire', () => {
  it('accepts a valid command', () => {
    expect(readCommand(bytes(valid))).toEqual({ kind: 'command', command: valid });
  });

  it('sends what is not JSON, too large, or without a command id or org to the DLQ', () => {
    expect(readCommand(Buffer.from('{nope'))).toMatchObject({ kind: 'unreadable', reason: 'not_json' });
    expect(readCommand(Buffer.alloc(0))).toMatchObject({ kind: 'unreadable', reason: 'not_json' });
    expect(readCommand(Buffer.alloc(MAX_COMMAND_BYTES + 1, 32))).toMatchObject({ kind: 'unreadable', reason: 'too_large' });
    expect(readCommand(bytes([valid]))).toMatchObject({ kind: 'unreadable', reason: 'not_a_command' });
    expect(readCommand(bytes({ ...valid, command_id: undefined }))).toMatchObject({ kind: 'unreadable', reason: 'not_a_command' });
    expect(readCommand(bytes({ ...valid, command_id: 'has space' }))).toMatchObject({ kind: 'unreadable', reason: 'not_a_command' });
    expect(readCommand(bytes({ ...valid, org: 'a/b' }))).toMatchObject({ kind: 'unreadable', reason: 'not_a_command' });
  });

  it('rejects, with a reason a person can act on, a readable command that is wrong', () => {
    expect(readCommand(bytes({ ...valid, type: 'agent.explode' }))).toMatchObject({ kind: 'rejected', reason: 'unknown_type', message: "unknown command type 'agent.explode'" });
    expect(readCommand(bytes({ ...valid, run_id: '../x' }))).toMatchObject({ kind: 'rejected', reason: 'invalid_payload', message: expect.stringMatching(/run_id/) });
    expect(readCommand(bytes({ ...valid, payload: { goal: '' } }))).toMatchObject({ kind: 'rejected', message: expect.stringMatching(/payload.goal/) });
    expect(readCommand(bytes({ ...valid, payload: { goal: 'x'.repeat(8_001) } }))).toMatchObject({ kind: 'rejected', message: expect.stringMatching(/8000/) });
    expect(readCommand(bytes({ ...valid, payload: { goal: 'x'.repeat(8_000) } }))).toMatchObject({ kind: 'command' });
    expect(readCommand(bytes({ ...valid, payload: { goal: 'ok', max_steps: 10_001 } }))).toMatchObject({ kind: 'rejected', message: expect.stringMatching(/max_steps/) });
    expect(readCommand(bytes({ ...valid, payload: { goal: 'ok', tier: 'gold' } }))).toMatchObject({ kind: 'rejected', message: expect.stringMatching(/enterprise, team, batch/) });
    expect(readCommand(bytes({ ...valid, payload: { goal: 'ok', extra: 1 } }))).toMatchObject({ kind: 'rejected', message: expect.stringMatching(/unknown field 'extra'/) });
    expect(readCommand(bytes({ ...valid, type: 'agent.pause', payload: { now: true } }))).toMatchObject({ kind: 'rejected', reason: 'invalid_payload' });
  });

  it('refuses text Postgres cannot store, and never echoes a malformed run id or type', () => {
    expect(readCommand(bytes({ ...valid, payload: { goal: 'a\u0000b' } }))).toMatchObject({ kind: 'rejected', reason: 'invalid_payload', message: expect.stringMatching(/payload.goal.*NUL/) });
    expect(readCommand(bytes({ ...valid, payload: { goal: 'x\ud800' } }))).toMatchObject({ kind: 'rejected', message: expect.stringMatching(/surrogate/) });
    expect(readCommand(bytes({ ...valid, payload: { goal: 'emoji \ud83d\ude00 ok' } })).kind).toBe('command');
    expect(readCommand(bytes({ ...valid, run_id: '\u0000', type: 'x\u0000' }))).toMatchObject({ kind: 'rejected', run_id: '', type: '' });
  });

  it('answers a value nested thousands of levels deep instead of overflowing the stack', () => {
    const deep = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`;
    const command = (n: number) => Buffer.from(`{"command_id":"c-1","type":"agent.start","org":"acme","run_id":"r","payload":{"goal":"g","x":${deep(n)}}}`);
    expect(readCommand(command(20_000))).toMatchObject({ kind: 'rejected', reason: 'invalid_payload', message: expect.stringMatching(/payload.x.* nested more than 64 levels/) });
    // Depth is counted from the payload: an object at the limit is still read (and then judged by its schema).
    expect(readCommand(command(MAX_JSON_DEPTH - 1))).toMatchObject({ kind: 'rejected', message: "payload: unknown field 'x'" });
    expect(readCommand(command(MAX_JSON_DEPTH))).toMatchObject({ kind: 'rejected', message: expect.stringMatching(/nested more than 64/) });
    expect(readCommand(bytes({ ...valid, payload: { goal: 'g', 'k\u0000': 1 } }))).toMatchObject({ kind: 'rejected', message: expect.stringMatching(/NUL/) });
  });

  it('sends bytes that are not UTF-8 to the DLQ rather than reading them as U+FFFD', () => {
    const bad = Buffer.concat([Buffer.from('{"command_id":"c-1","type":"agent.start","org":"acme","run_id":"r","payload":{"goal":"a'), Buffer.from([0xff]), Buffer.from('"}}')]);
    expect(readCommand(bad)).toEqual({ kind: 'unreadable', reason: 'not_json', detail: 'value is not valid UTF-8' });
    expect(readCommand(Buffer.from(JSON.stringify({ ...valid, payload: { goal: 'four bytes \u{1F680}' } }))).kind).toBe('command');
  });

  it('reads the org lowercased, in a command and in a rejection, so the outcome names the org it acted in (issue 16, finding 10)', () => {
    expect(readCommand(bytes({ ...valid, org: 'ACME' }))).toEqual({ kind: 'command', command: { ...valid, org: 'acme' } });
    expect(checkCommand({ ...valid, org: 'AcMe' })).toEqual({ kind: 'command', command: { ...valid, org: 'acme' } });
    expect(checkCommand({ ...valid, org: 'ACME', payload: {} })).toMatchObject({ kind: 'rejected', org: 'acme' });
    expect(checkCommand({ ...valid, org: 'ACME', type: 'agent.explode' })).toMatchObject({ kind: 'rejected', reason: 'unknown_type', org: 'acme' });
    // What the pattern refuses is still refused, not lowered into something it accepts.
    expect(checkCommand({ ...valid, org: '\u212Aelvin' })).toMatchObject({ kind: 'unreadable', reason: 'not_a_command' });
  });

  it('keeps the fields an outcome record needs when it rejects', () => {
    const reading = checkCommand({ ...valid, payload: {} });
    expect(reading).toMatchObject({ kind: 'rejected', command_id: 'c-1', org: 'acme', run_id: 'agent-42', type: 'agent.start' });
  });

  it('checks the eval start shapes: case ids or a count, a fraction between 0 and 1', () => {
    const evalStart = { ...valid, type: 'eval.start' };
    expect(checkCommand({ ...evalStart, payload: { model: 'm', suite: 's', cases: 10 } }).kind).toBe('command');
    expect(checkCommand({ ...evalStart, payload: { model: 'm', suite: 's', case_ids: ['a', 'b'] } }).kind).toBe('command');
    expect(checkCommand({ ...evalStart, payload: { model: 'm', suite: 's' } }).kind).toBe('rejected');
    expect(checkCommand({ ...evalStart, payload: { model: 'm', suite: 's', cases: 501 } }).kind).toBe('rejected');
    expect(checkCommand({ ...evalStart, payload: { model: 'm', suite: 's', cases: 3, fail_fraction: 1.5 } }).kind).toBe('rejected');
  });
});

describe('snapshot settings at the boundary (a series that can never capture is refused)', () => {
  const start = (snapshots: unknown) => checkCommand({ ...valid, payload: { goal: 'g', snapshots } });
  const fork = (payload: unknown) => checkCommand({ ...valid, type: 'agent.fork', payload });

  it('accepts a series that captures: defaults only, a cadence, per turn, or the final alone', () => {
    for (const ok of [{}, { interval_seconds: 30 }, { per_turn: true, at_end: false }, { interval_seconds: 5, at_end: false, max_snapshots: 1 }, { interval_seconds: 0, per_turn: true }]) {
      expect(start(ok)).toMatchObject({ kind: 'command' });
    }
  });

  it('refuses a series that would never capture, saying why', () => {
    for (const never of [{ at_end: false }, { at_end: false, interval_seconds: 0 }, { at_end: false, per_turn: false }]) {
      const reading = start(never);
      expect(reading).toMatchObject({ kind: 'rejected', reason: 'invalid_payload' });
      expect(reading.kind === 'rejected' && reading.message).toMatch(/at_end=false need a positive interval_seconds .* or per_turn=true; otherwise no capture ever runs/);
    }
  });

  it('refuses a timeout that is not positive, a budget below one, a negative cadence, unknown fields', () => {
    expect(start({ timeout_seconds: 0 })).toMatchObject({ kind: 'rejected', message: expect.stringMatching(/timeout_seconds/) });
    expect(start({ max_snapshots: 0 })).toMatchObject({ kind: 'rejected', message: expect.stringMatching(/max_snapshots/) });
    expect(start({ interval_seconds: -1 })).toMatchObject({ kind: 'rejected', message: expect.stringMatching(/interval_seconds/) });
    expect(start({ env_id: 'x' })).toMatchObject({ kind: 'rejected' });
  });

  it('checks fork payloads: a run id and a snapshot id, the same series rules', () => {
    expect(fork({ from_run_id: 'agent-1', snapshot_id: 'snap-0001' })).toMatchObject({ kind: 'command' });
    expect(fork({ from_run_id: 'agent-1' })).toMatchObject({ kind: 'rejected', message: expect.stringMatching(/snapshot_id/) });
    expect(fork({ from_run_id: '../x', snapshot_id: 'snap-0001' })).toMatchObject({ kind: 'rejected' });
    expect(fork({ from_run_id: 'agent-1', snapshot_id: 'snap-0001', snapshots: { at_end: false } })).toMatchObject({ kind: 'rejected', message: expect.stringMatching(/no capture ever runs/) });
  });
});

describe('reading a run event', () => {
  const event = {
    run_id: 'agent-42',
    org: 'acme',
    kind: 'agent',
    seq: 1,
    type: 'run_started',
    ts: '2026-11-29T17:00:00.000Z',
    payload: { state: { status: 'running', goal: 'g', step: 0, max_steps: 8, policy: 'scripted', tier: 'batch' } },
  };

  it('accepts a valid event, and one of a type it does not know', () => {
    expect(readRunEvent(bytes(event))).toEqual({ ok: true, event });
    expect(readRunEvent(bytes({ ...event, type: 'something_new', payload: {} })).ok).toBe(true);
  });

  it('refuses a seq below 1, an unknown status, a missing field or a bad time', () => {
    expect(readRunEvent(bytes({ ...event, seq: 0 }))).toMatchObject({ ok: false, detail: expect.stringMatching(/seq/) });
    expect(readRunEvent(bytes({ ...event, payload: { state: { status: 'sleeping' } } })).ok).toBe(false);
    expect(readRunEvent(bytes({ ...event, org: undefined })).ok).toBe(false);
    expect(readRunEvent(bytes({ ...event, ts: 'yesterday' })).ok).toBe(false);
    expect(readRunEvent(Buffer.from('not json')).ok).toBe(false);
    expect(readRunEvent(bytes({ ...event, seq: 2 ** 31 })).ok).toBe(false);
    expect(readRunEvent(bytes({ ...event, payload: { note: 'a\u0000' } })).ok).toBe(false);
    expect(readRunEvent(Buffer.from(JSON.stringify(event).replace('"payload":{', `"payload":{"x":${'['.repeat(20_000)}${']'.repeat(20_000)},`)))).toMatchObject({
      ok: false,
      detail: expect.stringMatching(/payload.x.* nested more than 64 levels/),
    });
    expect(readRunEvent(Buffer.concat([bytes(event).subarray(0, 20), Buffer.from([0xc3])]))).toEqual({ ok: false, detail: 'not UTF-8' });
  });
});

describe('normaliseOrg', () => {
  const orgRe = new RegExp(ORG_PATTERN);

  it('lowers ASCII capitals and changes nothing else, so orgs differing only in case become one', () => {
    expect(normaliseOrg('Acme')).toBe('acme');
    expect(normaliseOrg('ACME')).toBe('acme');
    expect(normaliseOrg('acme')).toBe('acme');
    expect(normaliseOrg('Org-9.Z_q')).toBe('org-9.z_q');
    expect(normaliseOrg('AZaz09._-')).toBe('azaz09._-');
  });

  it('keeps what the pattern accepts accepted, and what it refuses refused', () => {
    for (const org of ['A', 'Acme', `X${'Y'.repeat(63)}`, '0rg.Name_With-Parts']) {
      expect({ org, ok: orgRe.test(normaliseOrg(org)) }).toEqual({ org, ok: true });
    }
    // Unicode lowercasing would turn the Kelvin sign into `k` and a dotted capital I into `i` plus a
    // combining dot: neither may become an accepted org by normalising.
    for (const org of ['\u212Aelvin', '\u0130stanbul', 'a/b', '']) {
      expect({ org, ok: orgRe.test(normaliseOrg(org)) }).toEqual({ org, ok: false });
    }
    expect(normaliseOrg('\u212Aelvin')).toBe('\u212Aelvin');
  });

  it('is idempotent', () => {
    for (const org of ['Acme', 'acme', 'MiXeD-Case.9']) expect(normaliseOrg(normaliseOrg(org))).toBe(normaliseOrg(org));
  });
});
