import type { RunConversation, RunEvent } from '@agentrun/contracts';
import { useEffect, useState } from 'preact/hooks';
import { errorText, getJson, runPath } from './api';

type Message = RunConversation['messages'][number];

const ROLE_NAMES: Record<Message['role'], string> = { system: 'System', user: 'User', assistant: 'Assistant', tool: 'Tool result' };

/**
 * An `llm` run's conversation as a chat transcript (GET /runs/{id}/conversation, read again as steps
 * complete): each message with its step; tool calls and tool results folded.
 */
export function Transcript({ runId, events }: { runId: string; events: RunEvent[] }) {
  const [messages, setMessages] = useState<Message[]>([]);
  const [error, setError] = useState<string>();
  const steps = events.filter((e) => e.type === 'step_completed').length;

  useEffect(() => {
    const abort = new AbortController();
    getJson<RunConversation>(runPath(runId, '/conversation'), abort.signal)
      .then((body) => {
        setMessages(Array.isArray(body.messages) ? body.messages : []);
        setError(undefined);
      })
      .catch((err: unknown) => {
        if (!abort.signal.aborted) setError(errorText(err));
      });
    return () => abort.abort();
  }, [runId, steps]);

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
