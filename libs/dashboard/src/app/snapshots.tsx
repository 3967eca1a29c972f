import { MAX_GOAL_CHARS, type RunEvent, type SnapshotList } from '@agentrun/contracts';
import { useRef, useState } from 'preact/hooks';
import { ApiError, runPath, saveDownload, useJson } from './api';
import { useCommand } from './controls';
import { runHref } from './router';
import { SnapshotFiles } from './snapshot-files';
import { SnapshotCompare } from './diffs';
import { mergeSnapshots, type SnapshotRow } from './run-view';
import { formatTime, OutcomeLine, type Outcome } from './ui';

/** A row with an archive can be downloaded and forked; `capture_status` is provenance, not a gate. */
const usable = (row: SnapshotRow): boolean => Boolean(row.bundle_object_url);

const size = (bytes: number | undefined): string => (bytes === undefined ? '' : bytes < 1024 * 1024 ? `${(bytes / 1024).toFixed(1)} KiB` : `${(bytes / 1024 / 1024).toFixed(1)} MiB`);

/** The run's snapshots (GET /runs/{id}/snapshots, and `snapshot_captured` events as they come): download, fork. */
export function Snapshots({ runId, events }: { runId: string; events: RunEvent[] }) {
  const [selected, setSelected] = useState('');
  const [goal, setGoal] = useState('');
  const [download, setDownload] = useState<Outcome>();
  const [browsing, setBrowsing] = useState<string>();
  const fork = useCommand();
  const goalInput = useRef<HTMLInputElement>(null);
  const captured = events.filter((e) => e.type === 'snapshot_captured').length;

  const listed = useJson<SnapshotList>(runPath(runId, '/snapshots'), [captured]);
  const fromApi: SnapshotRow[] = Array.isArray(listed.body?.items) ? listed.body.items : [];
  const loadError = listed.error;

  const rows = mergeSnapshots(fromApi, events);
  const forkable = rows.filter(usable);
  const chosen = selected || forkable[forkable.length - 1]?.snapshot_id || '';

  const save = async (row: SnapshotRow) => {
    setDownload(undefined);
    try {
      const fileName = `${runId}-${row.snapshot_id}.tar.gz`;
      await saveDownload(runPath(runId, `/snapshots/${encodeURIComponent(row.snapshot_id)}/archive`), fileName, 'application/gzip');
      setDownload({ ok: true, text: `Downloaded ${fileName}` });
    } catch (err) {
      setDownload(err instanceof ApiError ? { ok: false, text: err.detail, title: err.title, status: err.status } : { ok: false, text: String(err) });
    }
  };

  return (
    <section class="panel snapshots" aria-labelledby="snapshots-title">
      <h2 id="snapshots-title">Snapshots</h2>
      {loadError && rows.length === 0 && <p class="muted">Snapshots could not be listed: {loadError}</p>}
      {!loadError && rows.length === 0 && <p class="muted">No snapshots of this run yet.</p>}
      {rows.length > 0 && (
        <table>
          <thead>
            <tr>
              <th scope="col">Snapshot</th>
              <th scope="col">Turn</th>
              <th scope="col">Captured</th>
              <th scope="col">Step</th>
              <th scope="col">Elapsed</th>
              <th scope="col">Capture</th>
              <th scope="col">Archive</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((row) => (
              <tr key={row.snapshot_id} data-snapshot-id={row.snapshot_id}>
                <th scope="row">
                  {row.snapshot_id}
                  {row.is_final ? ' (final)' : ''}
                </th>
                <td>{row.turn ?? '—'}</td>
                <td>{formatTime(row.captured_at_utc)}</td>
                <td>{row.step}</td>
                <td>{typeof row.elapsed_s === 'number' ? `${row.elapsed_s.toFixed(1)} s` : ''}</td>
                <td>
                  {row.capture_status}
                  {row.capture_reason ? `: ${row.capture_reason}` : ''}
                </td>
                <td>{row.bundle_object_url ? size(row.bytes) || 'yes' : 'none'}</td>
                <td class="actions">
                  <button type="button" class="secondary" disabled={!usable(row)} onClick={() => setBrowsing(row.snapshot_id)} aria-label={`Browse the files of ${row.snapshot_id}`}>
                    Files
                  </button>
                  <button type="button" class="secondary" disabled={!usable(row)} onClick={() => void save(row)} aria-label={`Download the archive of ${row.snapshot_id}`}>
                    Download
                  </button>
                  <button
                    type="button"
                    class="secondary"
                    disabled={!usable(row)}
                    aria-label={`Fork from ${row.snapshot_id}`}
                    onClick={() => {
                      setSelected(row.snapshot_id);
                      goalInput.current?.focus();
                    }}
                  >
                    Fork…
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <OutcomeLine outcome={download} testId="outcome-download" />
      {browsing && <SnapshotFiles runId={runId} snapshotId={browsing} onClose={() => setBrowsing(undefined)} />}
      <SnapshotCompare runId={runId} snapshotIds={forkable.map((r) => r.snapshot_id)} />
      {forkable.length > 0 && (
        <form
          class="fork"
          onSubmit={(e) => {
            e.preventDefault();
            void fork.send('fork', runPath(runId, '/fork'), { snapshot_id: chosen, ...(goal.trim() ? { goal: goal.trim() } : {}) }, (a) => ({
              ok: true,
              text: `Fork ${a.outcome}: ${a.run_id}.`,
              link: { href: runHref(a.run_id), label: `Open ${a.run_id}` },
            }));
          }}
        >
          <h3>Fork from a snapshot</h3>
          <label for="fork-snapshot">Snapshot</label>
          <select id="fork-snapshot" value={chosen} onChange={(e) => setSelected(e.currentTarget.value)}>
            {forkable.map((row) => (
              <option key={row.snapshot_id} value={row.snapshot_id}>
                {row.snapshot_id}
                {row.turn !== undefined ? ` (turn ${row.turn})` : ''}
              </option>
            ))}
          </select>
          <label for="fork-goal">
            New goal <span class="hint">(optional)</span>
          </label>
          <input id="fork-goal" ref={goalInput} maxLength={MAX_GOAL_CHARS} value={goal} onInput={(e) => setGoal(e.currentTarget.value)} />
          <button type="submit" disabled={fork.busy || !chosen}>
            Fork run
          </button>
          <OutcomeLine outcome={fork.outcome} testId="outcome-fork" />
        </form>
      )}
    </section>
  );
}
