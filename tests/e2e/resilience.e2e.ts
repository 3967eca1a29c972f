import { APPS, uniqueId } from '../support/platform';
import { expectComplete, pacedPlatformFollowingEvents, stepOf } from '../support/run-checks';
import { waitFor } from '../support/wait';

describe('runs survive their services stopping mid-run', () => {
  // Paced so the fault lands while the run is still going; unpaced, a 40-step run could end first.
  const { platform, events } = pacedPlatformFollowingEvents();

  it.each(APPS)('SIGTERM to the %s mid-run drains it cleanly; after a restart nothing is lost', async (app) => {
    const org = 'acme';
    const runId = uniqueId(`sigterm-${app}`);
    const steps = 40;
    await platform.publishCommand({ command_id: uniqueId('c'), type: 'agent.start', org, run_id: runId, payload: { goal: `survive ${app}`, max_steps: steps } });
    await waitFor('the run to be a few steps in', async () => (await stepOf(platform, org, runId)) >= 3, 60_000);
    const code = await platform.stopApp(app, 'SIGTERM');
    expect(code).toBe(0);
    // The fault landed mid-run: the run had not finished by the time the service was down.
    expect(await platform.statusOf(org, runId)).toBe('running');
    await platform.startApp(app);
    await expectComplete(platform, events(), org, runId, steps);
  });
});
