// Writes deploy/k8s/base/prometheus-rule.yaml: the groups of deploy/prometheus/rules.yml as the Prometheus
// Operator's PrometheusRule, so the cluster and the local Prometheus load the same alerts.
// tests/unit/observability-kit.spec.ts fails when the two differ.
//
//   node deploy/prometheus/prometheus-rule.mjs
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '../..');
const YAML = createRequire(join(root, 'package.json'))('yaml');
const rules = YAML.parse(readFileSync(join(here, 'rules.yml'), 'utf8'));
const rule = {
  apiVersion: 'monitoring.coreos.com/v1',
  kind: 'PrometheusRule',
  metadata: { name: 'agentrun', labels: { 'app.kubernetes.io/name': 'agentrun', 'app.kubernetes.io/component': 'alerts' } },
  spec: { groups: rules.groups },
};
const header = '# Generated from deploy/prometheus/rules.yml by `node deploy/prometheus/prometheus-rule.mjs` -- edit rules.yml, then run it.\n';
writeFileSync(join(root, 'deploy/k8s/base/prometheus-rule.yaml'), header + YAML.stringify(rule, { lineWidth: 0 }));
