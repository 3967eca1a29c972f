/**
 * @stack-exclusive: it stops the shared Temporal server (`stack.sh down temporal`) and starts it again. tests/run.sh runs it alone,
 * after the parallel pass.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Platform, uniqueId } from '../support/platform';
import { REPO_ROOT } from '../support/stack-env';
import { waitFor } from '../support/wait';

const run = promisify(execFile);

describe('writes while Temporal is down', () => {
  const platform = new Platform();
  beforeAll(() => platform.start());
  afterAll(() => platform.stop());

  it('answer 503 with Retry-After and decide nothing; the same Idempotency-Key succeeds once it is back', async () => {
    const runId = uniqueId('later');
    const key = uniqueId('key');
    await run('bash', ['deploy/local/stack.sh', 'down', 'temporal'], { cwd: REPO_ROOT });
    try {
      const res = await platform.http('POST', '/agents', { org: 'acme', headers: { 'Idempotency-Key': key }, body: { run_id: runId, goal: 'wait for it', max_steps: 1 } });
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('2');
      expect(res.body.detail).toMatch(/retry with the same Idempotency-Key/);
      const [ledger] = await platform.query<{ outcome: string | null }>('SELECT outcome FROM command_ledger WHERE org = $1 AND command_id = $2', ['acme', key]);
      expect(ledger.outcome).toBeNull();
      // The claim was given up, so a retry need not wait out the lease.
      const [lease] = await platform.query<{ free: boolean }>(`SELECT claimed_at < now() - interval '1 hour' AS free FROM command_ledger WHERE org = $1 AND command_id = $2`, ['acme', key]);
      expect(lease.free).toBe(true);
    } finally {
      await run('bash', ['deploy/local/stack.sh', 'up', 'temporal'], { cwd: REPO_ROOT });
    }
    const again = await waitFor(
      'the retry to be decided',
      async () => {
        const res = await platform.http('POST', '/agents', { org: 'acme', headers: { 'Idempotency-Key': key }, body: { run_id: runId, goal: 'wait for it', max_steps: 1 } });
        return res.status === 202 && res;
      },
      60_000,
      500,
    );
    expect(again.body).toMatchObject({ outcome: 'accepted', command_id: key });
    await platform.waitForStatus('acme', runId, 'done');
  });
});
