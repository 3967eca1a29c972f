import { proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { AgentActivities, ModelReply, ResearchAnswer, ResearchInput } from './agent-run.types';
import { digest } from './digest';
import { CARRIED_EVENTS_KEY, CARRIED_RESULT_KEY, isCarriedResult, type CarriedEvents, type CarriedResult } from './outbox';
import { MODEL_RETRY } from './retry-policies';
import { inTurn } from './model-turn';

/**
 * A sub-agent: its own history and replay; the parent sees one answer. When the parent hands it its
 * unpublished run events, its model call carries them (the worker publishes them as for the parent's
 * own calls) and the answer comes back wrapped with how far they went.
 */
export async function ResearchAgent(input: ResearchInput): Promise<ResearchAnswer | CarriedResult> {
  const { callModel } = proxyActivities<AgentActivities>({
    taskQueue: input.lanes.cpuTools,
    scheduleToCloseTimeout: '2m',
    startToCloseTimeout: '30s',
    retry: MODEL_RETRY,
  });
  const prompt = `research: ${input.question}`;
  const carried: CarriedEvents[] = input.run_events?.length ? [{ [CARRIED_EVENTS_KEY]: input.run_events }] : [];
  const answer: unknown = await inTurn((attemptsBefore) => (callModel as (...args: unknown[]) => Promise<unknown>)(
    {
      key: `${workflowInfo().workflowId}:0:${digest(prompt)}`,
      org: input.org,
      run_id: input.run_id,
      messages: [
        { role: 'system', content: 'You are a research sub-agent. Answer in two sentences.' },
        { role: 'user', content: prompt },
      ],
      tools: [],
      ...(input.budget ? { budget: input.budget } : {}),
      ...(input.budget_run_id ? { budget_run_id: input.budget_run_id } : {}),
      ...(input.tier ? { tier: input.tier } : {}),
      ...(input.step !== undefined ? { step: input.step } : {}),
      ...(attemptsBefore ? { attempts_before: attemptsBefore } : {}),
    },
    ...carried,
  ));
  const reply = (isCarriedResult(answer) ? answer.value : answer) as ModelReply;
  // The parent counts what the call cost as its own step's; a reply found in the ledger was counted when it was made.
  const answered: ResearchAnswer = { answer: reply.content, ...(reply.usage ? { usage: reply.usage } : {}), ...(reply.reused ? { reused: true } : {}) };
  return isCarriedResult(answer) ? { [CARRIED_RESULT_KEY]: answer[CARRIED_RESULT_KEY], value: answered } : answered;
}
