import { isToolName, type ToolName } from '@agentrun/contracts';
import type { ChatTurn, ModelReply } from './agent-run.types';

export interface PendingCall {
  id: string;
  name: ToolName;
  args: Record<string, string | number>;
}

/** The `llm` policy's state: the conversation so far, the tool calls still to run, the answer once given. */
export interface Conversation {
  messages: ChatTurn[];
  pending: PendingCall[];
  answer?: string;
  /** Replies cut short by the token limit, in a row. */
  truncated: number;
}

/** Messages kept across continue-as-new; the system prompt and the goal always stay. */
const MAX_MESSAGES = 60;

export function startConversation(goal: string): Conversation {
  return {
    messages: [
      { role: 'system', content: 'You are an agent with tools over a workspace. Call tools when they help; answer when done.' },
      { role: 'user', content: goal },
    ],
    pending: [],
    truncated: 0,
  };
}

function toolMessage(id: string, content: string): ChatTurn {
  return { role: 'tool', tool_call_id: id, content };
}

function primitiveArgs(value: unknown): Record<string, string | number> | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  return Object.fromEntries(
    Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, typeof v === 'string' || typeof v === 'number' ? v : JSON.stringify(v)]),
  );
}

/**
 * Takes a model reply into the conversation. Calls the model got wrong (unknown tool, arguments
 * that are not a JSON object) are answered at once with an error the model can read; the rest
 * wait to run. A reply without calls is the answer, unless the token limit cut it short.
 */
export function applyReply(conversation: Conversation, reply: ModelReply): Conversation {
  const messages = [...conversation.messages];
  messages.push({
    role: 'assistant',
    content: reply.content || null,
    ...(reply.tool_calls.length
      ? { tool_calls: reply.tool_calls.map((c) => ({ id: c.id, type: 'function' as const, function: { name: c.name, arguments: c.arguments } })) }
      : {}),
  });
  const pending: PendingCall[] = [];
  for (const call of reply.tool_calls) {
    if (!isToolName(call.name)) {
      messages.push(toolMessage(call.id, `error: there is no tool named '${call.name}'`));
      continue;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(call.arguments);
    } catch (err) {
      messages.push(toolMessage(call.id, `error: the arguments are not valid JSON (${(err as Error).message}); call again with a JSON object`));
      continue;
    }
    const args = primitiveArgs(parsed);
    if (!args) {
      messages.push(toolMessage(call.id, 'error: the arguments must be a JSON object'));
      continue;
    }
    pending.push({ id: call.id, name: call.name, args });
  }
  if (reply.tool_calls.length) return { messages, pending, truncated: 0 };
  if (reply.finish_reason === 'length') {
    messages.push({ role: 'user', content: 'continue' });
    return { messages, pending, truncated: conversation.truncated + 1 };
  }
  return { messages, pending, answer: reply.content, truncated: 0 };
}

export function applyToolResult(conversation: Conversation, callId: string, output: string): Conversation {
  return {
    ...conversation,
    messages: [...conversation.messages, toolMessage(callId, output)],
    pending: conversation.pending.filter((c) => c.id !== callId),
  };
}

/** Cancelled runs answer every call still waiting, so the conversation stays valid for a fork. */
export function cancelPending(conversation: Conversation): Conversation {
  return {
    ...conversation,
    messages: [...conversation.messages, ...conversation.pending.map((c) => toolMessage(c.id, 'cancelled'))],
    pending: [],
  };
}

/** Bounds the conversation carried across continue-as-new without orphaning a tool result. */
export function trimConversation(conversation: Conversation): Conversation {
  if (conversation.messages.length <= MAX_MESSAGES) return conversation;
  const head = conversation.messages.slice(0, 2);
  let tail = conversation.messages.slice(-(MAX_MESSAGES - 2));
  while (tail.length && tail[0].role === 'tool') tail = tail.slice(1);
  return { ...conversation, messages: [...head, ...tail] };
}
