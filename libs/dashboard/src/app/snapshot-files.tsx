import type { SnapshotFileList } from '@agentrun/contracts';
import { useEffect, useState } from 'preact/hooks';
import { call, errorText, getJson, runPath } from './api';

type Entry = SnapshotFileList['items'][number];

/** What the viewer shows of a file larger than this: its size, and the archive's download. */
const VIEW_MAX_BYTES = 1024 * 1024;

const filesPath = (runId: string, snapshotId: string, rest = '') => runPath(runId, `/snapshots/${encodeURIComponent(snapshotId)}/files${rest}`);
const fileSize = (bytes: number): string => (bytes < 1024 ? `${bytes} B` : bytes < 1024 * 1024 ? `${(bytes / 1024).toFixed(1)} KiB` : `${(bytes / 1024 / 1024).toFixed(1)} MiB`);

/** Whether a file's bytes read as text: valid UTF-8 without NULs. */
function asText(bytes: ArrayBuffer): string | undefined {
  const view = new Uint8Array(bytes);
  if (view.includes(0)) return undefined;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(view);
  } catch {
    return undefined;
  }
}

/**
 * A snapshot's workspace, looked into (GET /runs/{id}/snapshots/{snapshot_id}/files): its entries a
 * page at a time, and a text viewer for the file picked (its bytes fetched on their own; binary files
 * and files over the gateway's cap say so).
 */
export function SnapshotFiles({ runId, snapshotId, onClose }: { runId: string; snapshotId: string; onClose: () => void }) {
  const [entries, setEntries] = useState<Entry[]>([]);
  const [nextAfter, setNextAfter] = useState<string>();
  const [error, setError] = useState<string>();
  const [loading, setLoading] = useState(false);
  const [open, setOpen] = useState<{ path: string; text?: string; note?: string }>();

  const load = async (after?: string) => {
    setLoading(true);
    try {
      const page = await getJson<SnapshotFileList>(filesPath(runId, snapshotId, `?limit=200${after !== undefined ? `&after=${encodeURIComponent(after)}` : ''}`));
      setEntries((shown) => (after === undefined ? page.items : [...shown, ...page.items]));
      setNextAfter(page.next_after);
      setError(undefined);
    } catch (err) {
      setError(errorText(err));
    } finally {
      setLoading(false);
    }
  };
  useEffect(() => {
    setOpen(undefined);
    void load();
  }, [runId, snapshotId]);

  const view = async (entry: Entry) => {
    if (entry.size > VIEW_MAX_BYTES) return setOpen({ path: entry.path, note: `${fileSize(entry.size)}: too large to show here; download the archive.` });
    setOpen({ path: entry.path, note: 'Loading…' });
    try {
      const res = await call('GET', filesPath(runId, snapshotId, `/${entry.path.split('/').map(encodeURIComponent).join('/')}`), undefined, { accept: '*/*' });
      const text = asText(await res.arrayBuffer());
      setOpen(text === undefined ? { path: entry.path, note: `A binary file of ${fileSize(entry.size)}.` } : { path: entry.path, text });
    } catch (err) {
      setOpen({ path: entry.path, note: errorText(err) });
    }
  };

  return (
    <section class="snapshot-files" aria-labelledby="snapshot-files-title" data-testid="snapshot-files">
      <h3 id="snapshot-files-title">
        Files of {snapshotId}{' '}
        <button type="button" class="secondary" onClick={onClose} aria-label="Close the files">
          Close
        </button>
      </h3>
      {error && <p class="muted">The files could not be listed: {error}</p>}
      <div class="file-browser">
        <ul class="file-list" aria-label={`Files of ${snapshotId}`}>
          {entries.map((entry) => (
            <li key={entry.path} data-path={entry.path}>
              {entry.type === 'file' ? (
                <button type="button" class="link" aria-current={open?.path === entry.path ? 'true' : undefined} onClick={() => void view(entry)}>
                  {entry.path}
                </button>
              ) : (
                <span class="muted">
                  {entry.path}
                  {entry.type === 'dir' ? '/' : entry.link ? ` → ${entry.link}` : ''}
                </span>
              )}{' '}
              {entry.type === 'file' && <span class="hint">{fileSize(entry.size)}</span>}
            </li>
          ))}
        </ul>
        {nextAfter !== undefined && (
          <button type="button" class="secondary" disabled={loading} onClick={() => void load(nextAfter)}>
            More files
          </button>
        )}
        {open && (
          <figure class="file-view" data-testid="file-view">
            <figcaption>{open.path}</figcaption>
            {open.text !== undefined ? <pre>{open.text}</pre> : <p class="muted">{open.note}</p>}
          </figure>
        )}
      </div>
    </section>
  );
}
