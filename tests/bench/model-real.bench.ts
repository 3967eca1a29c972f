/**
 * The real small model (SmolLM2-135M-Instruct, Q4_1, on the CPU through node-llama-cpp) beside the scripted
 * model server, in one run: N fixed prompts, one request at a time, `max_tokens` 64, temperature 0.
 * Tokens/s is completion tokens over the wall time of the requests (and prompt tokens over the same time);
 * the scripted server's "tokens" are words, so its figure is the protocol's overhead, not a model's speed.
 * Also: the fetch (a no-op when present), the server's start and model load, time to the first streamed
 * token, and, when the shipped QA suite is there (libs/evals/suites/qa.jsonl, or QA_SUITE=<path>), its
 * score with the generate solver's request shape (the case input as the only message).
 *
 *   npm run bench:model-real -- [prompts=20]
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { exact, includes, type Target } from '@agentrun/evals';
import { startModelServer } from '../../apps/model-server/src/model-server';
import { textOfStream } from '../../apps/model-server/src/real/protocol';
import { postChat, REAL_MODEL, REPO_ROOT, startRealModel } from '../support/model-real';

const MAX_TOKENS = 64;

const PROMPTS = [
  'What is the capital of France?',
  'Explain in two sentences why the sky is blue.',
  'Write a haiku about autumn leaves.',
  'List three fruits that are red.',
  'What is 12 times 11?',
  'Give one tip for writing clear emails.',
  'Translate "good morning" into Spanish.',
  'Describe a cat in one sentence.',
  'What does a thermometer measure?',
  'Name the planet closest to the sun.',
  'Why do we need sleep?',
  'Suggest a name for a small bakery.',
  'What is the opposite of "ancient"?',
  'How many legs does a spider have?',
  'Summarise the story of Cinderella in one sentence.',
  'What is photosynthesis?',
  'Give an example of a renewable energy source.',
  'Write a short greeting for a birthday card.',
  'What is the boiling point of water in Celsius?',
  'Name a famous painting by Leonardo da Vinci.',
];

interface Pass {
  seconds: number;
  promptTokens: number;
  completionTokens: number;
  perRequestMs: number[];
}

const p50 = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor((values.length - 1) / 2)];
const load = () => loadavg().map((l) => l.toFixed(2)).join(' ');

async function pass(url: string, model: string, prompts: string[]): Promise<Pass> {
  const result: Pass = { seconds: 0, promptTokens: 0, completionTokens: 0, perRequestMs: [] };
  for (const prompt of prompts) {
    const t0 = performance.now();
    const res = await postChat(url, { model, max_tokens: MAX_TOKENS, temperature: 0, messages: [{ role: 'user', content: prompt }] });
    const ms = performance.now() - t0;
    if (res.status !== 200) throw new Error(`${model}: ${res.status} ${res.text}`);
    const { usage } = res.json();
    result.perRequestMs.push(ms);
    result.seconds += ms / 1000;
    result.promptTokens += usage.prompt_tokens;
    result.completionTokens += usage.completion_tokens;
  }
  return result;
}

/** Time from sending a streamed request to the first chunk with text in it. */
async function firstTokenMs(url: string, prompt: string): Promise<number> {
  const t0 = performance.now();
  const res = await fetch(`${url}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: REAL_MODEL, max_tokens: MAX_TOKENS, stream: true, messages: [{ role: 'user', content: prompt }] }),
  });
  if (!res.body) throw new Error('no stream body');
  const decoder = new TextDecoder();
  let seen = '';
  let first: number | undefined;
  for await (const chunk of res.body) {
    seen += decoder.decode(chunk as Uint8Array, { stream: true });
    if (first === undefined && textOfStream(seen.slice(0, seen.lastIndexOf('\n\n') + 2)).text !== '') first = performance.now() - t0;
  }
  if (first === undefined) throw new Error(`the stream had no text: ${seen.slice(0, 200)}`);
  return first;
}

function row(name: string, p: Pass): string {
  return `${name.padEnd(34)} ${(p.completionTokens / p.seconds).toFixed(1).padStart(8)} tok/s ${(p.promptTokens / p.seconds).toFixed(1).padStart(9)} prompt tok/s   p50 ${p50(p.perRequestMs).toFixed(1).padStart(7)} ms/request   (${p.completionTokens} + ${p.promptTokens} tokens in ${p.seconds.toFixed(2)} s)`;
}

/** The shipped QA suite with the generate solver's request: the case input as the one user message. */
async function qaSuite(url: string): Promise<void> {
  const path = process.env.QA_SUITE ?? resolve(REPO_ROOT, 'libs/evals/suites/qa.jsonl');
  if (!existsSync(path)) {
    console.log(`\nQA suite: skipped, ${path} is not there (set QA_SUITE=<path to qa.jsonl>)`);
    return;
  }
  const cases = readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as { id: string; input: string; target: Target });
  let right = 0;
  let contains = 0;
  const t0 = performance.now();
  const misses: string[] = [];
  for (const c of cases) {
    const res = await postChat(url, { model: REAL_MODEL, max_tokens: 256, temperature: 0, messages: [{ role: 'user', content: c.input }] });
    const output = res.json().choices[0].message.content;
    const score = exact(output, c.target).value;
    right += score;
    contains += includes(output, c.target).value;
    if (!score) misses.push(`${c.id}: ${JSON.stringify(output.slice(0, 60))}`);
  }
  console.log(`\nQA suite (${path}), ${cases.length} cases in ${((performance.now() - t0) / 1000).toFixed(1)} s:`);
  console.log(`  exact (the suite's scorer): ${right}/${cases.length}; includes: ${contains}/${cases.length}`);
  for (const miss of misses.slice(0, 8)) console.log(`  missed ${miss}`);
}

async function main(): Promise<void> {
  const n = Number(process.argv[2] ?? 20);
  if (!Number.isInteger(n) || n < 1) throw new Error(`prompts must be a positive integer, got '${process.argv[2]}'`);
  const prompts = Array.from({ length: n }, (_, i) => PROMPTS[i % PROMPTS.length]);
  console.log(`load average at start: ${load()}`);

  const t0 = performance.now();
  const install = spawnSync('bash', [resolve(REPO_ROOT, 'deploy/local/model-real.sh'), 'install'], { stdio: 'inherit' });
  if (install.status !== 0) throw new Error('deploy/local/model-real.sh install failed');
  console.log(`fetch step: ${((performance.now() - t0) / 1000).toFixed(1)} s`);

  const real = await startRealModel();
  const scripted = await startModelServer({ port: 0 });
  try {
    console.log(`real-model server: ready ${real.startMs} ms after spawn (model load ${real.loadMs} ms)`);
    // One warm-up request each: the first pays for page faults in the weights and the JIT.
    await pass(real.url, REAL_MODEL, prompts.slice(0, 1));
    await pass(scripted.url, 'scripted', prompts.slice(0, 1));

    const realPass = await pass(real.url, REAL_MODEL, prompts);
    const scriptedPass = await pass(scripted.url, 'scripted', prompts);
    const ttft: number[] = [];
    for (const prompt of prompts.slice(0, Math.min(n, 10))) ttft.push(await firstTokenMs(real.url, prompt));

    console.log(`\n${n} prompts, one at a time, max_tokens ${MAX_TOKENS}, temperature 0`);
    console.log(row(`real: ${REAL_MODEL}`, realPass));
    console.log(row('baseline: scripted server (words)', scriptedPass));
    console.log(`real: time to the first streamed token, p50 of ${ttft.length}: ${p50(ttft).toFixed(1)} ms`);
    console.log(`real: p50 request / scripted p50 request: ${(p50(realPass.perRequestMs) / p50(scriptedPass.perRequestMs)).toFixed(0)}x`);

    await qaSuite(real.url);
  } finally {
    await scripted.close();
    const code = await real.stop();
    if (code !== 0) console.log(`the real-model server exited with ${code}:\n${real.output().slice(-2000)}`);
  }
  console.log(`\nload average at the end: ${load()}`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
