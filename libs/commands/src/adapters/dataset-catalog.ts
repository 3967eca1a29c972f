import type { ObjectStore } from '@agentrun/archive';
import type { EvalStartPayload } from '@agentrun/contracts';
import { canonicalJsonl, datasetId, datasetObjectKey, DatasetError, listSuites, loadSuite, parseCase, type EvalCase } from '@agentrun/evals';
import type { EvalStore, StoredDataset } from '@agentrun/persistence';
import type { NamedSpec } from '@agentrun/workflows';
import type { DatasetCatalogPort, DatasetRefusal, ResolvedDataset } from '../ports';

/** Cases one eval run may take: each case's state travels on every event of the run. */
export const MAX_EVAL_CASES = 500;

/** Shipped suites by name and by content hash, read once. */
function shippedSuites(): { byName: Map<string, ResolvedDataset>; byId: Map<string, ResolvedDataset> } {
  const byName = new Map<string, ResolvedDataset>();
  const byId = new Map<string, ResolvedDataset>();
  for (const entry of listSuites()) {
    const { cases } = loadSuite(entry.name);
    const resolved: ResolvedDataset = {
      ref: { id: datasetId(cases), name: entry.name, source: 'shipped' },
      case_ids: cases.map((c) => c.id),
      solver: entry.solver,
      scorers: entry.scorers.map((s) => (typeof s === 'string' ? { name: s } : (s as NamedSpec))),
    };
    byName.set(entry.name, resolved);
    byId.set(resolved.ref.id, resolved);
  }
  return { byName, byId };
}

/** Datasets for eval starts and uploads: shipped suites from the evals library, stored ones in Postgres and the object store. */
export class DatasetCatalog implements DatasetCatalogPort {
  private shipped?: ReturnType<typeof shippedSuites>;

  constructor(
    private readonly evals: EvalStore,
    private readonly objects: ObjectStore,
    readonly modelEndpoints: readonly string[],
  ) {}

  /** Stores parsed cases under a name: the object first, so a listed dataset always has its cases. */
  async save(org: string, name: string, cases: EvalCase[], origin: 'upload' | 'inline'): Promise<StoredDataset> {
    const id = datasetId(cases);
    const text = Buffer.from(canonicalJsonl(cases));
    if (!(await this.objects.stat(datasetObjectKey(org, id)))) await this.objects.put(datasetObjectKey(org, id), text);
    return this.evals.saveDataset(org, { id, name, origin, case_ids: cases.map((c) => c.id), bytes: text.length });
  }

  async resolve(org: string, dataset: NonNullable<EvalStartPayload['dataset']>): Promise<ResolvedDataset | DatasetRefusal> {
    this.shipped ??= shippedSuites();
    if ('cases' in dataset) {
      const cases: EvalCase[] = [];
      const seen = new Set<string>();
      try {
        dataset.cases.forEach((value, i) => {
          const c = parseCase(value, `dataset.cases[${i}]`);
          if (seen.has(c.id)) throw new DatasetError(`dataset.cases[${i}]: the id '${c.id}' is used twice`);
          seen.add(c.id);
          cases.push(c);
        });
      } catch (err) {
        if (err instanceof DatasetError) return { reason: 'invalid_eval', message: err.message };
        throw err;
      }
      const stored = await this.save(org, dataset.name ?? 'inline', cases, 'inline');
      return { ref: { id: stored.id, name: stored.name, source: 'stored' }, case_ids: cases.map((c) => c.id) };
    }
    if ('name' in dataset) {
      const suite = this.shipped.byName.get(dataset.name);
      if (suite) return suite;
      const stored = await this.evals.findDataset(org, { name: dataset.name });
      if (stored) return { ref: { id: stored.id, name: stored.name, source: 'stored' }, case_ids: stored.case_ids };
      return { reason: 'unknown_dataset', message: `unknown dataset '${dataset.name}': the shipped suites are ${[...this.shipped.byName.keys()].join(', ')}; uploaded datasets are listed by GET /datasets` };
    }
    const suite = this.shipped.byId.get(dataset.id);
    if (suite) return suite;
    const stored = await this.evals.findDataset(org, { id: dataset.id });
    if (stored) return { ref: { id: stored.id, name: stored.name, source: 'stored' }, case_ids: stored.case_ids };
    return { reason: 'unknown_dataset', message: `no dataset with id '${dataset.id}' in this org` };
  }
}
