import { proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { AgentActivities, ResearchInput } from './agent-run.types';
import { digest } from './digest';
import { MODEL_RETRY } from './retry-policies';

/** A sub-agent: its own history and replay; the parent sees one answer. */
export async function ResearchAgent(input: ResearchInput): Promise<string> {
  const { callModel } = proxyActivities<AgentActivities>({
    taskQueue: input.lanes.cpuTools,
    scheduleToCloseTimeout: '2m',
    startToCloseTimeout: '30s',
    retry: MODEL_RETRY,
  });
  const prompt = `research: ${input.question}`;
  const reply = await callModel({
    key: `${workflowInfo().workflowId}:0:${digest(prompt)}`,
    org: input.org,
    run_id: input.run_id,
    messages: [
      { role: 'system', content: 'You are a research sub-agent. Answer in two sentences.' },
      { role: 'user', content: prompt },
    ],
    tools: [],
  });
  return reply.content;
}
