import { execFile, execFileSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { TOPICS, type CommandOutcome } from '@agentrun/contracts';
import { createToken } from '../support/browser';
import { Platform, uniqueId, type TopicRecord } from '../support/platform';
import { stackUrls } from '../support/stack-env';
import { tokenCli, tokenCliWith } from '../support/token-cli';
import { waitFor } from '../support/wait';

/**
 * Issue 16, finding 2: "Kafka commands trust the org they name. Any producer on agentrun.commands.v1
 * can pause, cancel or steer any org's run." In production mode a command on Kafka now counts only
 * when signed with a command key of the org it names; anything else is `rejected / unauthorized`,
 * the same answer whether the run exists or not, and nothing is recorded. Local mode takes unsigned
 * commands, and says so at startup.
 */

const UNAUTHORIZED = /^the command carries no valid command key signature/;

/** What the README tells a user to run: the key's text as the HMAC key, the exact value bytes, lowercase hex. */
function readmeSignature(key: string, value: string): string {
  return createHmac('sha256', key).update(value).digest('hex');
}

function hasKcat(): boolean {
  try {
    execFileSync('kcat', ['-V'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

describe('commands on Kafka in production mode need a command key of their org', () => {
  // Each tool call takes a second, so a run is still running when it is steered.
  const platform = new Platform({ AGENTRUN_MODE: 'production', TOOL_PACE_TICKS: '4', TOOL_PACE_MS: '250' });
  const orgA = uniqueId('cmdauth-a');
  const orgB = uniqueId('cmdauth-b');
  let databaseUrl: string;
  let tokenA: string;
  let outcomes: TopicRecord<CommandOutcome>[];
  const keys: Record<string, { id: string; key: string }> = {};

  beforeAll(async () => {
    await platform.start();
    databaseUrl = stackUrls().databaseUrl(platform.database);
    tokenA = await createToken(databaseUrl, orgA);
    outcomes = await platform.follow<CommandOutcome>(TOPICS.commandResults);
  });
  afterAll(() => platform.stop());

  const outcomeOf = (commandId: string, nth = 1): Promise<CommandOutcome> =>
    waitFor(`outcome ${nth} of command ${commandId}`, () => outcomes.filter((o) => o.value.command_id === commandId)[nth - 1]?.value, 60_000, 100);
  const ledger = (commandId: string) => platform.query('SELECT 1 FROM command_ledger WHERE command_id = $1', [commandId]);

  /** Publishes with a plain kafkajs producer, as the README's snippet does. */
  const publish = (command: { command_id: string; run_id: string; [k: string]: unknown }, credential?: { id: string; key: string }) => {
    const value = JSON.stringify(command);
    const headers = credential ? { 'agentrun-key-id': credential.id, 'agentrun-signature': readmeSignature(credential.key, value) } : undefined;
    return platform.publishCommands([{ key: command.run_id, value, ...(headers ? { headers } : {}) }]);
  };
  const pause = (org: string, runId: string, commandId = uniqueId('pause')) => ({ command_id: commandId, type: 'agent.pause', org, run_id: runId, payload: {} });

  async function startRun(): Promise<string> {
    // Over HTTP, with an API token: the gateway calls the command service itself and needs no command key.
    const runId = uniqueId('agent');
    const res = await platform.http('POST', '/agents', { headers: { Authorization: `Bearer ${tokenA}` }, body: { run_id: runId, goal: 'read the workspace', max_steps: 60 } });
    expect(res.status).toBe(202);
    await platform.waitForStatus(orgA, runId, 'running');
    return runId;
  }

  it('the CLI issues a key once (bound to the normalised org), lists it by fingerprint, and needs the server secret', async () => {
    const secret = { AGENTRUN_COMMAND_KEY_SECRET: platform.commandKeySecret };
    // The orchestrator says at startup what it takes.
    expect(readFileSync(join(platform.dataDir, 'logs', 'orchestrator.log'), 'utf8')).toMatch(/commands on Kafka must be signed with a command key of their org/);

    const created = await tokenCliWith(secret, databaseUrl, 'command-key', 'create', '--org', orgA.toUpperCase());
    expect(created.code).toBe(0);
    expect(created.stderr).toMatch(/shown once/);
    const field = (name: string, out: string) => new RegExp(`^${name}: +(\\S+)$`, 'm').exec(out)?.[1] ?? '';
    keys.a = { id: field('id', created.stdout), key: field('key', created.stdout) };
    expect(keys.a.id).toMatch(/^ck_[0-9a-f]{16}$/);
    expect(keys.a.key).toMatch(/^ark_[A-Za-z0-9_-]{43}$/);
    expect(field('org', created.stdout)).toBe(orgA);
    const fingerprint = field('fingerprint', created.stdout);

    const b = await tokenCliWith(secret, databaseUrl, 'command-key', 'create', '--org', orgB);
    keys.b = { id: field('id', b.stdout), key: field('key', b.stdout) };

    const listed = await tokenCli(databaseUrl, 'command-key', 'list', '--org', orgA);
    expect(listed.code).toBe(0);
    expect(listed.stdout.trim().split('\n')).toEqual([expect.stringMatching(new RegExp(`^${keys.a.id}\\t${orgA}\\t${fingerprint}\\tcreated \\S+Z\\tactive$`))]);
    expect(listed.stdout).not.toContain(keys.a.key);
    // The table holds no key: only its id, org and hash.
    const [row] = await platform.query<Record<string, unknown>>('SELECT * FROM command_keys WHERE id = $1', [keys.a.id]);
    expect(Object.keys(row).sort()).toEqual(['created_at', 'id', 'key_hash', 'org', 'revoked_at']);
    expect(JSON.stringify(row)).not.toContain(keys.a.key.slice(4));

    // Without the secret there is nothing to derive a key from.
    const without = await tokenCli(databaseUrl, 'command-key', 'create', '--org', orgA);
    expect(without.code).toBe(1);
    expect(without.stderr).toMatch(/needs AGENTRUN_COMMAND_KEY_SECRET/);
  });

  it("the issue's attack: an unsigned pause of another org's run is rejected / unauthorized, the run goes on, and nothing is recorded", async () => {
    const runId = await startRun();
    const command = pause(orgA, runId);
    await publish(command);

    const outcome = await outcomeOf(command.command_id);
    expect(outcome).toMatchObject({ org: orgA, run_id: runId, type: 'agent.pause', outcome: 'rejected', reason: 'unauthorized', message: expect.stringMatching(UNAUTHORIZED) });
    expect(await ledger(command.command_id)).toHaveLength(0);
    expect(await platform.statusOf(orgA, runId)).toBe('running');

    // A run that does not exist gets the very same answer: the refusal says nothing about runs.
    const ghost = pause(orgA, uniqueId('no-such-run'));
    await publish(ghost);
    const ghostOutcome = await outcomeOf(ghost.command_id);
    expect(ghostOutcome.reason).toBe('unauthorized');
    expect(ghostOutcome.message).toBe(outcome.message);

    // Another org's key, on a command naming org A: the same.
    const wrongOrg = pause(orgA, runId);
    await publish(wrongOrg, keys.b);
    expect(await outcomeOf(wrongOrg.command_id)).toMatchObject({ outcome: 'rejected', reason: 'unauthorized', message: outcome.message });
    // Org A's key id with a signature of anything else (here: org B's key).
    const forged = pause(orgA, runId);
    await publish(forged, { id: keys.a.id, key: keys.b.key });
    expect(await outcomeOf(forged.command_id)).toMatchObject({ reason: 'unauthorized' });
    // An invalid command, unsigned, is refused for its credential before its payload is looked at.
    const invalid = { command_id: uniqueId('bad'), type: 'agent.inject_context', org: orgA, run_id: runId, payload: { text: 42 } };
    await publish(invalid);
    expect(await outcomeOf(invalid.command_id)).toMatchObject({ reason: 'unauthorized' });
    expect(await platform.statusOf(orgA, runId)).toBe('running');

    // The same command id, now signed with org A's key: accepted (the refusal did not burn the id), and the run pauses.
    await publish(command, keys.a);
    expect(await outcomeOf(command.command_id, 2)).toMatchObject({ outcome: 'accepted', org: orgA, run_id: runId });
    await platform.waitForStatus(orgA, runId, 'paused');

    // The orchestrator's log says why each was refused; the sender was told none of it.
    const log = readFileSync(join(platform.dataDir, 'logs', 'orchestrator.log'), 'utf8');
    expect(log).toMatch(new RegExp(`refused command ${command.command_id} .*: no agentrun-key-id header`));
    expect(log).toMatch(new RegExp(`refused command ${wrongOrg.command_id} .*belongs to org ${orgB}, not ${orgA}`));
    expect(log).toMatch(new RegExp(`refused command ${forged.command_id} .*signature does not match`));

    // HTTP commands are authenticated by the API token and need no key.
    const cancel = await platform.http('POST', `/runs/${runId}/cancel`, { headers: { Authorization: `Bearer ${tokenA}` }, body: {} });
    expect(cancel.status).toBe(202);
    await platform.waitForStatus(orgA, runId, 'cancelled');
  });

  it('a revoked key signs nothing from then on', async () => {
    const runId = await startRun();
    const revoked = await tokenCli(databaseUrl, 'command-key', 'revoke', keys.a.id);
    expect(revoked).toMatchObject({ code: 0, stdout: `revoked ${keys.a.id}\n` });
    expect((await tokenCli(databaseUrl, 'command-key', 'revoke', keys.a.id)).stdout).toBe(`${keys.a.id} was already revoked\n`);
    expect((await tokenCli(databaseUrl, 'command-key', 'list', '--org', orgA)).stdout).toMatch(/\trevoked \S+Z\n$/);

    const command = pause(orgA, runId);
    await publish(command, keys.a);
    expect(await outcomeOf(command.command_id)).toMatchObject({ outcome: 'rejected', reason: 'unauthorized' });
    expect(await platform.statusOf(orgA, runId)).toBe('running');
    expect(await ledger(command.command_id)).toHaveLength(0);

    // A new key for the org works at once.
    const fresh = await tokenCliWith({ AGENTRUN_COMMAND_KEY_SECRET: platform.commandKeySecret }, databaseUrl, 'command-key', 'create', '--org', orgA);
    const id = /^id: +(\S+)$/m.exec(fresh.stdout)?.[1] ?? '';
    const key = /^key: +(\S+)$/m.exec(fresh.stdout)?.[1] ?? '';
    const cancel = { command_id: uniqueId('cancel'), type: 'agent.cancel', org: orgA, run_id: runId, payload: {} };
    await publish(cancel, { id, key });
    expect(await outcomeOf(cancel.command_id)).toMatchObject({ outcome: 'accepted' });
    await platform.waitForStatus(orgA, runId, 'cancelled');
  });

  // The README's kcat line, run as printed (the e2e tier installs Debian's kcat: deploy/local/ensure-kcat.sh).
  it("the README's kcat line publishes a command the orchestrator accepts", async () => {
    if (!hasKcat()) throw new Error('kcat is not on PATH: run `bash deploy/local/ensure-kcat.sh` (the e2e tier of `npm test` does)');
    const secret = { AGENTRUN_COMMAND_KEY_SECRET: platform.commandKeySecret };
    const created = await tokenCliWith(secret, databaseUrl, 'command-key', 'create', '--org', orgA);
    const id = /^id: +(\S+)$/m.exec(created.stdout)?.[1] ?? '';
    const key = /^key: +(\S+)$/m.exec(created.stdout)?.[1] ?? '';
    const runId = await startRun();
    const commandId = uniqueId('kcat');
    const value = JSON.stringify(pause(orgA, runId, commandId));
    await promisify(execFile)(
      'bash',
      [
        '-c',
        `printf '%s\\n' "$VALUE" | kcat -P -b "$BROKERS" -t "$TOPIC" -k "$RUN_ID" -X topic.partitioner=murmur2_random \\
  -H agentrun-key-id="$KEY_ID" \\
  -H agentrun-signature="$(printf %s "$VALUE" | openssl dgst -sha256 -hmac "$KEY" -r | cut -d' ' -f1)"`,
      ],
      { env: { PATH: process.env.PATH ?? '', VALUE: value, KEY: key, KEY_ID: id, RUN_ID: runId, BROKERS: stackUrls().kafkaBrokers.join(','), TOPIC: platform.topic(TOPICS.commands) } },
    );
    expect(await outcomeOf(commandId)).toMatchObject({ outcome: 'accepted', run_id: runId });
    await platform.waitForStatus(orgA, runId, 'paused');
  });
});

describe('commands on Kafka in local mode', () => {
  const platform = new Platform();
  let outcomes: TopicRecord<CommandOutcome>[];

  beforeAll(async () => {
    await platform.start();
    outcomes = await platform.follow<CommandOutcome>(TOPICS.commandResults);
  });
  afterAll(() => platform.stop());

  it('are taken unsigned, and the orchestrator says at startup that they are not authenticated', async () => {
    expect(readFileSync(join(platform.dataDir, 'logs', 'orchestrator.log'), 'utf8')).toMatch(/commands are not authenticated: local mode/);
    const org = uniqueId('local');
    const runId = uniqueId('agent');
    const commandId = uniqueId('start');
    await platform.publishCommand({ command_id: commandId, type: 'agent.start', org, run_id: runId, payload: { goal: 'tidy up', max_steps: 2 } });
    expect(await waitFor('the outcome', () => outcomes.find((o) => o.value.command_id === commandId)?.value, 60_000)).toMatchObject({ outcome: 'accepted' });
    await platform.waitForStatus(org, runId, 'done');
  });
});
