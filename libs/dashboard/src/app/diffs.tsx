import type { RunDiff, SnapshotDiff } from '@agentrun/contracts';
import { useState } from 'preact/hooks';
import { errorText, getJson, runPath, useJson } from './api';
import { runHref } from './router';
import { Link } from './ui';

type FileDiff = SnapshotDiff['files'];

/** Two workspaces compared: added, removed and changed files, each changed text file's diff folded. */
export function FileDiffView({ files, testId }: { files: FileDiff; testId: string }) {
  const none = files.added.length + files.removed.length + files.changed.length === 0;
  return (
    <div class="file-diff" data-testid={testId}>
      {none && <p class="muted">No file differs ({files.unchanged} the same).</p>}
      {!none && (
        <p class="muted">
          {files.added.length} added, {files.removed.length} removed, {files.changed.length} changed, {files.unchanged} the same.
        </p>
      )}
      <ul class="changes">
        {files.added.map((e) => (
          <li key={`+${e.path}`} class="added" data-change="added" data-path={e.path}>
            + {e.path}
          </li>
        ))}
        {files.removed.map((e) => (
          <li key={`-${e.path}`} class="removed" data-change="removed" data-path={e.path}>
            − {e.path}
          </li>
        ))}
        {files.changed.map((c) => (
          <li key={`~${c.path}`} class="changed" data-change="changed" data-path={c.path}>
            {c.diff ? (
              <details>
                <summary>
                  ~ {c.path} <span class="hint">({c.what.join(', ')})</span>
                </summary>
                <pre class="unified-diff">{c.diff}</pre>
                {c.diff_truncated && <p class="hint">Cut at 64 KiB.</p>}
              </details>
            ) : (
              <span>
                ~ {c.path}{' '}
                <span class="hint">
                  ({c.what.join(', ')}
                  {c.diff_omitted ? `; no diff: ${c.diff_omitted.replace('_', ' ')}` : ''})
                </span>
              </span>
            )}
          </li>
        ))}
      </ul>
    </div>
  );
}

/** A fork against its parent (GET /runs/{id}/diff?with=): where they went different ways, and their final workspaces. */
export function ForkDiff({ runId, parent, ended }: { runId: string; parent: string; ended: boolean }) {
  const { body: diff, error } = useJson<RunDiff>(runPath(runId, `/diff?with=${encodeURIComponent(parent)}`), [ended]);
  return (
    <section class="panel fork-diff" aria-labelledby="fork-diff-title" data-testid="fork-diff">
      <h2 id="fork-diff-title">
        Against its parent, <Link href={runHref(parent)}>{parent}</Link>
      </h2>
      {error && <p class="muted">The runs could not be compared: {error}</p>}
      {diff && (
        <>
          <p data-testid="first-divergent-step">
            {diff.first_divergent_step === null ? 'No step differs.' : `First different step: ${diff.first_divergent_step}`}
            {` · ${diff.steps_shared} step${diff.steps_shared === 1 ? '' : 's'} shared`}
            {diff.fork ? ` · forked at step ${diff.fork.step} (${diff.fork.snapshot_id})` : ''}
          </p>
          {diff.final_files ? (
            <>
              <h3>
                Final workspaces: {diff.final_files.snapshots.run} against {parent}'s {diff.final_files.snapshots.with}
              </h3>
              <FileDiffView files={diff.final_files.files} testId="fork-final-files" />
            </>
          ) : (
            <p class="muted">No final snapshot on both sides to compare yet.</p>
          )}
        </>
      )}
    </section>
  );
}

/** Two snapshots of a run compared (GET /runs/{id}/snapshots/{a}/diff/{b}). */
export function SnapshotCompare({ runId, snapshotIds }: { runId: string; snapshotIds: string[] }) {
  const [from, setFrom] = useState('');
  const [to, setTo] = useState('');
  const [diff, setDiff] = useState<SnapshotDiff>();
  const [error, setError] = useState<string>();
  if (snapshotIds.length < 2) return null;
  const a = from || snapshotIds[0];
  const b = to || snapshotIds[snapshotIds.length - 1];
  const compare = async () => {
    setError(undefined);
    try {
      setDiff(await getJson<SnapshotDiff>(runPath(runId, `/snapshots/${encodeURIComponent(a)}/diff/${encodeURIComponent(b)}`)));
    } catch (err) {
      setDiff(undefined);
      setError(errorText(err));
    }
  };
  return (
    <form
      class="snapshot-compare"
      aria-label="Compare two snapshots"
      onSubmit={(e) => {
        e.preventDefault();
        void compare();
      }}
    >
      <h3>Compare two snapshots</h3>
      <SnapshotSelect id="compare-from" label="From" value={a} snapshotIds={snapshotIds} onChange={setFrom} />
      <SnapshotSelect id="compare-to" label="To" value={b} snapshotIds={snapshotIds} onChange={setTo} />
      <button type="submit" class="secondary">
        Compare
      </button>
      {error && <p class="muted">{error}</p>}
      {diff && <FileDiffView files={diff.files} testId="snapshot-diff" />}
    </form>
  );
}

function SnapshotSelect({ id, label, value, snapshotIds, onChange }: { id: string; label: string; value: string; snapshotIds: string[]; onChange: (id: string) => void }) {
  return (
    <>
      <label for={id}>{label}</label>
      <select id={id} value={value} onChange={(e) => onChange(e.currentTarget.value)}>
        {snapshotIds.map((snapshotId) => (
          <option key={snapshotId} value={snapshotId}>
            {snapshotId}
          </option>
        ))}
      </select>
    </>
  );
}
