import { temporal } from '@temporalio/proto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { RUN_EVENT_TYPES, type RunEventEnvelope } from '@agentrun/contracts';
import { readRunEvent, runEventPayloadProblem } from '@agentrun/contracts/validation';
import { REPO_ROOT } from '../support/stack-env';

/** Every event the workflows handed to the publish activity in the saved histories. */
function publishedEvents(): { file: string; event: RunEventEnvelope }[] {
  const dir = join(REPO_ROOT, 'tests/fixtures/histories');
  const out: { file: string; event: RunEventEnvelope }[] = [];
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.pb'))) {
    const history = temporal.api.history.v1.History.decode(readFileSync(join(dir, file)));
    for (const entry of history.events ?? []) {
      const scheduled = entry.activityTaskScheduledEventAttributes;
      if (scheduled?.activityType?.name !== 'publishRunEvents') continue;
      for (const payload of scheduled.input?.payloads ?? []) {
        for (const event of JSON.parse(Buffer.from(payload.data ?? []).toString('utf8')) as RunEventEnvelope[]) out.push({ file, event });
      }
    }
  }
  return out;
}

describe('the run-event catalogue against what the workflows emit', () => {
  const events = publishedEvents();

  it('finds events of several types in the saved histories', () => {
    expect(new Set(events.map((e) => e.event.type)).size).toBeGreaterThanOrEqual(4);
  });

  it('every published event is read off the topic and fits the payload schema of its type', () => {
    const misfits = events
      .map(({ file, event }) => {
        const reading = readRunEvent(Buffer.from(JSON.stringify(event)));
        const problem = reading.ok ? runEventPayloadProblem(event) : reading.detail;
        return problem && `${file} seq ${event.seq} ${event.type}: ${problem}`;
      })
      .filter(Boolean);
    expect(misfits).toEqual([]);
    expect(events.every(({ event }) => (RUN_EVENT_TYPES as readonly string[]).includes(event.type))).toBe(true);
  });
});
