// Splits one rendered overlay: the custom resources are validated here against their CRD schemas (KEDA's
// from @kubernetes-models/keda, the Prometheus Operator's ServiceMonitor and PrometheusRule from
// @kubernetes-models/prometheus-operator); every other object is written to OUT for kubernetes-validate.
//
//   node split-and-check-crds.mjs RENDERED.yaml OUT.yaml [LABEL]
//
// Run with NODE_PATH naming the node_modules that hold `yaml` and both model packages.
// Exits 1 after printing one line per problem, each naming the object.
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(join(process.cwd(), 'noop.js'));
const YAML = require('yaml');
// Each API group and version we deploy custom resources of: where its models and type declarations are.
async function modelsOf(pkg, groupVersion, kinds) {
  const dir = join(dirname(require.resolve(`${pkg}/package.json`)), groupVersion);
  const mod = await import(join(dir, 'index.js'));
  return { dir, models: Object.fromEntries(kinds.map((k) => [k, mod[k]])) };
}
const GROUPS = {
  'keda.sh/v1alpha1': await modelsOf('@kubernetes-models/keda', 'keda.sh/v1alpha1', ['ScaledObject', 'ScaledJob', 'TriggerAuthentication', 'ClusterTriggerAuthentication']),
  'monitoring.coreos.com/v1': await modelsOf('@kubernetes-models/prometheus-operator', 'monitoring.coreos.com/v1', ['ServiceMonitor', 'PodMonitor', 'PrometheusRule']),
};
const CUSTOM = /^(keda\.sh|monitoring\.coreos\.com)\//;

// The package's compiled validators check types, enums and required fields but let unknown fields
// through (the API server would prune them silently). Its type declarations list every field, so a
// second pass reads them and rejects anything else, as strict validation of the core objects does.
const declared = new Map();
function fieldsOf(dir, file) {
  const cacheKey = join(dir, file);
  if (declared.has(cacheKey)) return declared.get(cacheKey);
  const text = readFileSync(join(dir, `${file}.d.ts`), 'utf8');
  const imports = new Map([...text.matchAll(/import \{ (\w+) \} from "\.\/(\w+)\.js";/g)].map((m) => [m[1], m[2]]));
  // `export type IX = IY;`: the same fields as the aliased type.
  const alias = /^export type I\w+ = (\w+);$/m.exec(text);
  if (alias && imports.has(alias[1])) {
    const fields = fieldsOf(dir, imports.get(alias[1]));
    declared.set(cacheKey, fields);
    return fields;
  }
  const body = text.slice(text.indexOf('export interface'), text.indexOf('\n}', text.indexOf('export interface')));
  const fields = new Map();
  // `export interface IX extends IY {`: IY's fields too (the Prometheus Operator's endpoints inherit their HTTP settings).
  const parent = /^export interface \w+ extends (\w+) \{/m.exec(text);
  if (parent && imports.has(parent[1])) for (const [k, v] of fieldsOf(dir, imports.get(parent[1]))) fields.set(k, v);
  for (const m of body.matchAll(/^ {4}"([^"]+)"\??: (.*);?$/gm)) {
    const type = m[2];
    const array = /^Array<(\w+)>/.exec(type);
    const named = array ? array[1] : /^(\w+)/.exec(type)?.[1];
    fields.set(m[1], { file: named && imports.get(named), array: Boolean(array) });
  }
  declared.set(cacheKey, fields);
  return fields;
}

function unknownFields(dir, value, file, path, out) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return;
  const fields = fieldsOf(dir, file);
  for (const [key, child] of Object.entries(value)) {
    const field = fields.get(key);
    if (!field) {
      out.push(`${path}.${key}: unknown field`);
      continue;
    }
    if (!field.file) continue;
    if (field.array && Array.isArray(child)) child.forEach((item, i) => unknownFields(dir, item, field.file, `${path}.${key}[${i}]`, out));
    else unknownFields(dir, child, field.file, `${path}.${key}`, out);
  }
}

const [renderedPath, outPath, label = renderedPath] = process.argv.slice(2);
const docs = YAML.parseAllDocuments(readFileSync(renderedPath, 'utf8')).map((d) => d.toJS()).filter(Boolean);
const problems = [];
const rest = [];
let checked = 0;
for (const obj of docs) {
  const id = `${obj.kind}/${obj.metadata?.name}`;
  if (!CUSTOM.test(String(obj.apiVersion))) {
    rest.push(obj);
    continue;
  }
  const group = GROUPS[obj.apiVersion];
  const Model = group?.models[obj.kind];
  if (!Model) {
    problems.push(`${id}: no schema for ${obj.apiVersion} ${obj.kind}`);
    continue;
  }
  try {
    new Model(obj).validate();
  } catch (err) {
    problems.push(`${id}: ${err.message}`);
  }
  const unknown = [];
  unknownFields(group.dir, obj, obj.kind, '', unknown);
  for (const u of unknown.filter((u) => !u.startsWith('.metadata.'))) problems.push(`${id}: ${u.slice(1)}`);
  checked++;
}
writeFileSync(outPath, rest.map((o) => YAML.stringify(o)).join('---\n'));
for (const p of problems) console.error(`ERROR ${label}: ${p}`);
console.log(`${checked} custom resource(s) checked (KEDA, Prometheus Operator), ${rest.length} other object(s) passed on`);
process.exit(problems.length ? 1 : 0);
