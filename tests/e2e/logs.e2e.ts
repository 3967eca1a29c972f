/**
 * Issue 17, part 3: log lines about a run parse as JSON and carry its run. The platform writes each
 * service's output to dataDir/logs/<app>.log with LOG_FORMAT=json, as `npm start` writes
 * .stack/logs/apps/; LOG_LEVEL=debug so each activity attempt is logged too. One agent run is started
 * over Kafka with a W3C traceparent header; then every line of the orchestrator (command consumer,
 * workflows, CPU tools), the projector and the gpu-worker (GPU tools) is read back.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Platform, uniqueId } from '../support/platform';
import { waitFor } from '../support/wait';

type Line = Record<string, unknown> & { level: string; msg?: string; service: string; context?: string; run_id?: string; org?: string; command_id?: string; trace_id?: string };

describe('JSON logs with the run', () => {
  const platform = new Platform({ LOG_LEVEL: 'debug' });
  beforeAll(() => platform.start());
  afterAll(() => platform.stop());

  /**
   * The app's log as records: a JSON line each, or a record of the Temporal SDK's default logger (a
   * `<time> [LEVEL] message` line and the lines of its metadata after it), which must not appear:
   * the SDK's runtime logger is temporalLogger() (libs/telemetry), which writes our JSON lines. Anything
   * else fails the test, naming the line.
   */
  const recordsOf = (app: string): { json: string[]; sdk: string[] } => {
    const json: string[] = [];
    const sdk: string[] = [];
    for (const line of readFileSync(join(platform.dataDir, 'logs', `${app}.log`), 'utf8').split('\n')) {
      if (line.trim() === '') continue;
      if (line.startsWith('{')) json.push(line);
      else if (/^\d{4}-\d\d-\d\dT[\d:.]+Z \[(TRACE|DEBUG|INFO|WARN|ERROR)\] /.test(line)) sdk.push(line);
      else if (sdk.length > 0 && /^(\s|\}|\])/.test(line)) sdk[sdk.length - 1] += `\n${line}`;
      else throw new Error(`${app}.log has a line that is neither JSON nor the Temporal SDK's: ${line.slice(0, 300)}`);
    }
    return { json, sdk };
  };
  const rawLines = (app: string): string[] => recordsOf(app).json;
  /** Every JSON line of the app's log, parsed (one that does not parse fails the test, naming it). */
  const linesOf = (app: string): Line[] =>
    rawLines(app).map((line) => {
      try {
        return JSON.parse(line) as Line;
      } catch {
        throw new Error(`${app}.log has a line that is not JSON: ${line.slice(0, 300)}`);
      }
    });

  it('the orchestrator, projector and gpu-worker write JSON lines; the lines about a run carry its org and run_id, the command line its command_id and trace_id', async () => {
    const org = 'logs-org';
    const runId = uniqueId('logs');
    const commandId = uniqueId('cmd');
    const traceId = randomBytes(16).toString('hex');
    await platform.publishCommands([
      {
        key: runId,
        value: JSON.stringify({ command_id: commandId, type: 'agent.start', org, run_id: runId, payload: { goal: 'look around the workspace', max_steps: 6 } }),
        headers: { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` },
      },
    ]);
    await platform.waitForStatus(org, runId, 'done');
    // The projector logs the end once it stored it; the activities were logged as they ran.
    await waitFor('the projector to log the run as finished', () => linesOf('projector').some((l) => l.run_id === runId && /run_finished/.test(l.msg ?? '')), 30_000, 200);

    for (const app of ['orchestrator', 'projector', 'gpu-worker']) {
      const lines = linesOf(app);
      expect(lines.length).toBeGreaterThan(0);
      for (const line of lines) {
        expect({ app, line: Object.keys(line).filter((k) => ['time', 'level', 'service', 'msg'].includes(k)).sort() }).toEqual({ app, line: ['level', 'msg', 'service', 'time'] });
        expect(line.service).toBe(app);
        expect(typeof line.context).toBe('string');
      }
      // Every line that names the run (in its message or anywhere else) is JSON and carries it as fields.
      // The Temporal SDK's own lines come through temporalLogger() too: no line of its default logger anywhere.
      expect({ app, sdk: recordsOf(app).sdk }).toEqual({ app, sdk: [] });
      const aboutRun = rawLines(app).filter((l) => l.includes(runId));
      expect({ app, aboutRun: aboutRun.length > 0 }).toEqual({ app, aboutRun: true });
      for (const raw of aboutRun) {
        const line = JSON.parse(raw) as Line;
        expect({ app, msg: line.msg, org: line.org, run_id: line.run_id }).toEqual({ app, msg: line.msg, org, run_id: runId });
      }
    }

    const orchestrator = linesOf('orchestrator').filter((l) => l.run_id === runId);
    // The command consumer's decision: the command, and the trace the traceparent header started.
    const decided = orchestrator.find((l) => l.context === 'CommandConsumer');
    expect(decided).toMatchObject({ level: 'info', org, run_id: runId, command_id: commandId, trace_id: traceId, msg: expect.stringMatching(new RegExp(`^command ${commandId} \\(agent\\.start\\) at \\d+@\\d+: accepted$`)) });
    // The CPU tool lane in the orchestrator: each activity attempt, in its run's context.
    expect(orchestrator.filter((l) => l.context === 'activity').map((l) => l.msg)).toEqual(expect.arrayContaining([expect.stringMatching(/^runTool started \(attempt 1\)$/), expect.stringMatching(/^runTool completed in \d+ ms/)]));

    // The projector: the run's start and end stored, each in the run's context.
    const projector = linesOf('projector').filter((l) => l.run_id === runId);
    expect(projector.map((l) => l.msg)).toEqual(expect.arrayContaining(['stored run_started of agent run (seq 1, running)', expect.stringMatching(/^stored run_finished of agent run \(seq \d+, done\)$/)]));
    expect(projector.every((l) => l.org === org && l.context === 'RunEventProjector')).toBe(true);

    // A GPU tool on the gpu-worker: its activity lines name the run too.
    const gpu = linesOf('gpu-worker').filter((l) => l.run_id === runId);
    expect(gpu.filter((l) => l.context === 'activity').map((l) => l.msg)).toEqual(expect.arrayContaining([expect.stringMatching(/^runTool started \(attempt 1\)$/), expect.stringMatching(/^runTool completed in \d+ ms/)]));
    expect(gpu.every((l) => l.org === org)).toBe(true);
  });
});
