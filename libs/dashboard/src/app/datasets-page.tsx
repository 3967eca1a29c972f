import type { Dataset, DatasetList } from '@agentrun/contracts';
import { useEffect, useState } from 'preact/hooks';
import { call, errorText, getJson } from './api';
import { DATASET_NAME_PATTERN, datasetNameFor, scorerName } from './eval-view';
import { ColumnHeads, failureOf, formatTime, OutcomeLine, type Outcome } from './ui';

const bytesText = (bytes: number): string => (bytes < 1024 ? `${bytes} B` : bytes < 1024 * 1024 ? `${(bytes / 1024).toFixed(1)} KiB` : `${(bytes / 1024 / 1024).toFixed(1)} MiB`);

/**
 * GET /datasets while `wanted`: asked for when it becomes true and again whenever `version` changes (a
 * page bumps it after an upload). The last list stays while a new one is asked for, or when one fails.
 */
export function useDatasetList(wanted: boolean, version = 0): { list: DatasetList | undefined; error: string | undefined } {
  const [list, setList] = useState<DatasetList>();
  const [error, setError] = useState<string>();
  useEffect(() => {
    if (!wanted) return;
    const abort = new AbortController();
    getJson<DatasetList>('/datasets', abort.signal)
      .then((body) => {
        setList(body);
        setError(undefined);
      })
      .catch((err: unknown) => !abort.signal.aborted && setError(errorText(err)));
    return () => abort.abort();
  }, [wanted, version]);
  return { list, error };
}

/** The org's uploaded datasets and the shipped suites (GET /datasets), and a form to upload one. */
export function DatasetsPage() {
  const [version, setVersion] = useState(0);
  const { list, error: loadError } = useDatasetList(true, version);

  return (
    <section aria-labelledby="datasets-title" class="datasets-page">
      <h1 id="datasets-title">Datasets</h1>
      <UploadForm onUploaded={() => setVersion((v) => v + 1)} />
      {loadError && (
        <p class="error" role="alert">
          {`The datasets could not be listed: ${loadError}`}
        </p>
      )}
      <section class="panel" aria-labelledby="uploaded-title">
        <h2 id="uploaded-title">Uploaded</h2>
        {list && list.datasets.length === 0 && <p class="muted">No dataset uploaded yet.</p>}
        {list && list.datasets.length > 0 && (
          <table class="datasets">
            <ColumnHeads names={['Name', 'Cases', 'Size', 'Uploaded', 'Id (content hash)']} />
            <tbody>
              {list.datasets.map((d) => (
                <tr key={d.id + d.created_at} data-dataset-id={d.id} data-dataset-name={d.name}>
                  <th scope="row">{d.name}</th>
                  <td>{d.case_count}</td>
                  <td>{bytesText(d.bytes)}</td>
                  <td>{formatTime(d.created_at)}</td>
                  <td>
                    <code title={d.id}>{d.id.slice(0, 12)}</code>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>
      <section class="panel" aria-labelledby="suites-title">
        <h2 id="suites-title">Suites shipped with the platform</h2>
        {list && (
          <table class="suites">
            <ColumnHeads names={['Name', 'Description', 'Solver', 'Scorers', 'Cases']} />
            <tbody>
              {list.suites.map((s) => (
                <tr key={s.name} data-suite={s.name}>
                  <th scope="row">{s.name}</th>
                  <td>{s.description}</td>
                  <td>{s.solver}</td>
                  <td>{s.scorers.map(scorerName).join(', ')}</td>
                  <td>{s.cases}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>
    </section>
  );
}

/** Uploads a .jsonl file as it is (streamed by the gateway, which names a bad line in its 400). */
function UploadForm({ onUploaded }: { onUploaded: () => void }) {
  const [file, setFile] = useState<File>();
  const [name, setName] = useState('');
  const [suggested, setSuggested] = useState('');
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<Outcome>();

  const choose = (chosen: File | undefined) => {
    setFile(chosen);
    // The name follows the file until the person types one of their own.
    const suggestion = chosen ? datasetNameFor(chosen.name) : '';
    if (!name || name === suggested) setName(suggestion);
    setSuggested(suggestion);
  };

  const upload = async () => {
    if (!file) return;
    setBusy(true);
    setOutcome(undefined);
    try {
      const res = await call('POST', `/datasets?name=${encodeURIComponent(name.trim())}`, file, { contentType: 'application/x-ndjson' });
      const stored = (await res.json()) as Dataset;
      setOutcome({ ok: true, text: `Uploaded ${stored.name}: ${stored.case_count} case${stored.case_count === 1 ? '' : 's'}, ${bytesText(stored.bytes)}, id ${stored.id.slice(0, 12)}.` });
      onUploaded();
    } catch (err) {
      setOutcome(failureOf(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <form
      class="panel upload"
      aria-label="Upload a dataset"
      onSubmit={(e) => {
        e.preventDefault();
        void upload();
      }}
    >
      <h2>Upload a dataset</h2>
      <p class="hint">
        JSONL, one case per line: <code>{'{"id": "a", "input": "...", "target": "..."}'}</code>. Uploading under a name that exists makes a newer version of it.
      </p>
      <div class="fields">
        <div class="field">
          <label for="dataset-file">JSONL file</label>
          <input id="dataset-file" type="file" accept=".jsonl,.ndjson,application/x-ndjson,application/jsonl" required onChange={(e) => choose(e.currentTarget.files?.[0])} />
        </div>
        <div class="field">
          <label for="dataset-name">Dataset name</label>
          <input id="dataset-name" required pattern={DATASET_NAME_PATTERN} value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </div>
      </div>
      <button type="submit" disabled={busy || !file}>
        Upload
      </button>
      <OutcomeLine outcome={outcome} testId="outcome-upload" />
    </form>
  );
}
