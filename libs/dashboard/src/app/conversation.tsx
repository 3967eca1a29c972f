import type { RunConversation, RunEvent } from '@agentrun/contracts';
import { runPath, useJson } from './api';

type Message = RunConversation['messages'][number];

const ROLE_NAMES: Record<Message['role'], string> = { system: 'System', user: 'User', assistant: 'Assistant', tool: 'Tool result' };

/**
 * An `llm` run's conversation as a chat transcript (GET /runs/{id}/conversation, read again as steps
 * complete): each message with its step; tool calls and tool results folded.
 */
export function Transcript({ runId, events }: { runId: string; events: RunEvent[] }) {
  const steps = events.filter((e) => e.type === 'step_completed').length;
  const { body, error } = useJson<RunConversation>(runPath(runId, '/conversation'), [steps]);
  const messages: Message[] = Array.isArray(body?.messages) ? body.messages : [];

  if (messages.length === 0 && !error) return null;
  const names = new Map(messages.flatMap((m) => (m.tool_calls ?? []).map((c) => [c.id, c.function.name] as const)));
  return (
    <section class="panel transcript" aria-labelledby="transcript-title" data-testid="transcript">
      <h2 id="transcript-title">Conversation</h2>
      {error && <p class="muted">The conversation could not be read: {error}</p>}
      <ol class="messages">
        {messages.map((m, i) => (
          <li key={i} class={`message ${m.role}`} data-role={m.role} data-step={m.step}>
            <p class="who">
              {ROLE_NAMES[m.role]}
              {m.role === 'tool' && m.tool_call_id ? ` (${names.get(m.tool_call_id) ?? m.tool_call_id})` : ''} <span class="hint">step {m.step}</span>
            </p>
            {m.role === 'tool' ? (
              <details>
                <summary>Output</summary>
                <pre>{m.content ?? ''}</pre>
              </details>
            ) : (
              m.content && <p class="reply-text">{m.content}</p>
            )}
            {(m.tool_calls ?? []).map((c) => (
              <details key={c.id} class="tool-call" data-tool={c.function.name}>
                <summary>Called {c.function.name}</summary>
                <pre>{c.function.arguments}</pre>
              </details>
            ))}
            {m.truncated && <p class="hint">Cut at 8,000 characters.</p>}
          </li>
        ))}
      </ol>
    </section>
  );
}
