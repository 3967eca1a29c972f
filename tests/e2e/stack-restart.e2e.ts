/**
 * @stack-exclusive: it takes the whole stack down (`stack.sh down`) and brings it back mid-run.
 * tests/run.sh runs it alone, after the parallel pass.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { APPS, uniqueId } from '../support/platform';
import { expectComplete, pacedPlatformFollowingEvents, stepOf } from '../support/run-checks';
import { REPO_ROOT } from '../support/stack-env';
import { waitFor } from '../support/wait';

const run = promisify(execFile);

describe('runs survive the servers stopping mid-run', () => {
  // Paced so the fault lands while the run is still going; unpaced, a 40-step run could end first.
  const { platform, events } = pacedPlatformFollowingEvents();

  it('stack:down and stack:up mid-run: the run still completes with no lost or repeated event', async () => {
    const org = 'acme';
    const runId = uniqueId('stack-restart');
    const steps = 40;
    await platform.publishCommand({ command_id: uniqueId('c'), type: 'agent.start', org, run_id: runId, payload: { goal: 'outlive the servers', max_steps: steps } });
    await waitFor('the run to be a few steps in', async () => (await stepOf(platform, org, runId)) >= 3, 60_000);
    expect(await platform.statusOf(org, runId)).toBe('running');
    await platform.db?.end();
    await run('bash', ['deploy/local/stack.sh', 'down'], { cwd: REPO_ROOT });
    await run('bash', ['deploy/local/stack.sh', 'up'], { cwd: REPO_ROOT });
    await platform.reconnectDb();
    await expectComplete(platform, events(), org, runId, steps);
    // Every service found its way back on its own.
    for (const app of APPS) {
      await waitFor(`${app} ready again`, async () => (await fetch(`http://127.0.0.1:${platform.ports[app]}/readyz`)).status === 200, 120_000, 500);
    }
  });
});
