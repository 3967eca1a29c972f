/**
 * What token streaming gives a reader of a run's SSE stream, in one run on the real servers: for each
 * reply of an `llm` run (the local model server writes it in word-sized chunks `[pace:N]` ms apart, as
 * a model generating at that rate would), the time from the stream's last event before the reply to
 * its first `token` frame (first token), and to the step's `step_completed` frame (the full reply:
 * all a reader saw before streaming). Runs go one at a time, first unpaced (what the platform adds),
 * then paced; prints p50 and p90 of both and the ratio for each.
 *
 *   npm run bench:tokens [-- RUNS [PACE_MS]]     (default 6 runs each, 40 ms between chunks)
 */
import { Platform, uniqueId } from '../support/platform';
import { SseClient, type SseFrame } from '../support/sse';
import { waitFor } from '../support/wait';

const RUNS = Number(process.argv[2] ?? 6);
const PACE_MS = Number(process.argv[3] ?? 40);
const ORG = 'bench';

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))];
const ms = (n: number) => n.toFixed(1).padStart(7);

interface Reply {
  firstToken: number;
  fullReply: number;
  deltas: number;
  /** Frames of an index already received (none is expected on a quiet machine). */
  repeats: number;
  chars: number;
}

/** Each reply of the stream that streamed: its first token and its step's event, from the event frame before it. */
function repliesOf(frames: SseFrame[]): Reply[] {
  const out: Reply[] = [];
  const tokens = frames.filter((f) => f.event === 'token').map((f) => ({ at: f.at, ...(JSON.parse(f.data) as { step: number; attempt: number; index: number; delta: string }) }));
  for (const step of new Set(tokens.map((t) => t.step))) {
    const mine = tokens.filter((t) => t.step === step);
    const first = mine[0];
    const before = frames.filter((f) => f.id !== undefined && f.at <= first.at).pop();
    const completed = frames.find((f) => f.event === 'step_completed' && (JSON.parse(f.data) as { payload: { step: number } }).payload.step === step);
    if (!before || !completed) continue;
    const indexes = new Set(mine.map((t) => `${t.attempt}:${t.index}`));
    out.push({ firstToken: first.at - before.at, fullReply: completed.at - before.at, deltas: indexes.size, repeats: mine.length - indexes.size, chars: mine.reduce((n, t) => n + t.delta.length, 0) / (mine.length / indexes.size) });
  }
  return out;
}

/** `runs` llm runs one at a time (and one more first, not counted), their replies' figures. */
async function measure(platform: Platform, runs: number, paceMs: number): Promise<Reply[]> {
  const replies: Reply[] = [];
  for (let i = 0; i < runs + 1; i++) {
    const runId = uniqueId('tokens');
    const started = await platform.http('POST', '/agents', { org: ORG, body: { run_id: runId, goal: `[scenario:agent] [pace:${paceMs}] find the parser notes`, max_steps: 8, policy: 'llm' } });
    if (started.status !== 202) throw new Error(`start answered ${started.status}`);
    const stream = await waitFor('the stream to open', async () => {
      const client = new SseClient(`${platform.gatewayUrl}/runs/${runId}/events`, { 'X-Org': ORG });
      await waitFor('headers', () => client.status !== 0 || client.ended, 5_000, 1);
      if (client.status === 200) return client;
      client.close();
      return undefined;
    }, 30_000, 5);
    await waitFor('the end of the run', () => stream.ended, 120_000, 10);
    if (i > 0) replies.push(...repliesOf(stream.frames));
  }
  if (replies.length === 0) throw new Error('no reply streamed');
  return replies;
}

function report(replies: Reply[], paceMs: number): void {
  const first = replies.map((r) => r.firstToken);
  const full = replies.map((r) => r.fullReply);
  const avg = (f: (r: Reply) => number) => (replies.reduce((n, r) => n + f(r), 0) / replies.length).toFixed(1);
  console.log(`\n${replies.length} streamed replies, chunks ${paceMs} ms apart, ${avg((r) => r.deltas)} deltas (${avg((r) => r.repeats)} repeated) and ${avg((r) => r.chars)} characters a reply on average`);
  console.log(`first token on SSE        p50 ${ms(pct(first, 0.5))} ms   p90 ${ms(pct(first, 0.9))} ms`);
  console.log(`full reply (step event)   p50 ${ms(pct(full, 0.5))} ms   p90 ${ms(pct(full, 0.9))} ms`);
  console.log(`ratio p50 first token / full reply: ${(pct(first, 0.5) / pct(full, 0.5)).toFixed(2)}x`);
}

async function main(): Promise<void> {
  const platform = new Platform({ TOOL_PACE_TICKS: '1', TOOL_PACE_MS: '50' });
  await platform.start();
  try {
    // Unpaced first: what the platform itself adds between the model and the reader, chunk or event.
    report(await measure(platform, RUNS, 0), 0);
    report(await measure(platform, RUNS, PACE_MS), PACE_MS);
  } finally {
    await platform.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
