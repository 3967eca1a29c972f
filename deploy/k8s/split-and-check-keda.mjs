// Splits one rendered overlay: KEDA objects are validated here against the KEDA CRD schemas shipped by
// @kubernetes-models/keda; every other object is written to OUT for kubernetes-validate.
//
//   node split-and-check-keda.mjs RENDERED.yaml OUT.yaml [LABEL]
//
// Run with NODE_PATH naming the node_modules that hold `yaml` and `@kubernetes-models/keda`.
// Exits 1 after printing one line per problem, each naming the object.
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(join(process.cwd(), 'noop.js'));
const YAML = require('yaml');
const kedaRoot = dirname(require.resolve('@kubernetes-models/keda/package.json'));
const { ScaledObject, ScaledJob, TriggerAuthentication, ClusterTriggerAuthentication } = await import(
  join(kedaRoot, 'keda.sh/v1alpha1/index.js')
);
const MODELS = { ScaledObject, ScaledJob, TriggerAuthentication, ClusterTriggerAuthentication };
const TYPES_DIR = join(kedaRoot, 'keda.sh/v1alpha1');

// The package's compiled validators check types, enums and required fields but let unknown fields
// through (the API server would prune them silently). Its type declarations list every field, so a
// second pass reads them and rejects anything else, as strict validation of the core objects does.
const declared = new Map();
function fieldsOf(file) {
  if (declared.has(file)) return declared.get(file);
  const text = readFileSync(join(TYPES_DIR, `${file}.d.ts`), 'utf8');
  const imports = new Map([...text.matchAll(/import \{ (\w+) \} from "\.\/(\w+)\.js";/g)].map((m) => [m[1], m[2]]));
  // `export type IX = IY;`: the same fields as the aliased type.
  const alias = /^export type I\w+ = (\w+);$/m.exec(text);
  if (alias && imports.has(alias[1])) {
    const fields = fieldsOf(imports.get(alias[1]));
    declared.set(file, fields);
    return fields;
  }
  const body = text.slice(text.indexOf('export interface'), text.indexOf('\n}', text.indexOf('export interface')));
  const fields = new Map();
  for (const m of body.matchAll(/^ {4}"([^"]+)"\??: (.*);?$/gm)) {
    const type = m[2];
    const array = /^Array<(\w+)>/.exec(type);
    const named = array ? array[1] : /^(\w+)/.exec(type)?.[1];
    fields.set(m[1], { file: named && imports.get(named), array: Boolean(array) });
  }
  declared.set(file, fields);
  return fields;
}

function unknownFields(value, file, path, out) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return;
  const fields = fieldsOf(file);
  for (const [key, child] of Object.entries(value)) {
    const field = fields.get(key);
    if (!field) {
      out.push(`${path}.${key}: unknown field`);
      continue;
    }
    if (!field.file) continue;
    if (field.array && Array.isArray(child)) child.forEach((item, i) => unknownFields(item, field.file, `${path}.${key}[${i}]`, out));
    else unknownFields(child, field.file, `${path}.${key}`, out);
  }
}

const [renderedPath, outPath, label = renderedPath] = process.argv.slice(2);
const docs = YAML.parseAllDocuments(readFileSync(renderedPath, 'utf8')).map((d) => d.toJS()).filter(Boolean);
const problems = [];
const rest = [];
let checked = 0;
for (const obj of docs) {
  const id = `${obj.kind}/${obj.metadata?.name}`;
  if (!String(obj.apiVersion).startsWith('keda.sh/')) {
    rest.push(obj);
    continue;
  }
  const Model = obj.apiVersion === 'keda.sh/v1alpha1' ? MODELS[obj.kind] : undefined;
  if (!Model) {
    problems.push(`${id}: no KEDA schema for ${obj.apiVersion} ${obj.kind}`);
    continue;
  }
  try {
    new Model(obj).validate();
  } catch (err) {
    problems.push(`${id}: ${err.message}`);
  }
  const unknown = [];
  unknownFields(obj, obj.kind, '', unknown);
  for (const u of unknown.filter((u) => !u.startsWith('.metadata.'))) problems.push(`${id}: ${u.slice(1)}`);
  checked++;
}
writeFileSync(outPath, rest.map((o) => YAML.stringify(o)).join('---\n'));
for (const p of problems) console.error(`ERROR ${label}: ${p}`);
console.log(`${checked} KEDA object(s) checked, ${rest.length} other object(s) passed on`);
process.exit(problems.length ? 1 : 0);
