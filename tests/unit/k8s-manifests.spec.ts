/**
 * The Kubernetes manifests (deploy/k8s), rendered per overlay with `kubectl kustomize`, against the code
 * they deploy: every container of every workload (the Deployments, and the workspace-host StatefulSet
 * whose pods each run one workspace host's two processes, orchestrator cpu-tools and snapshotter) starts one app with its probes on the
 * app's own port, resources, a non-root context and a grace period above the drain deadline, and sets
 * what the app needs in a cluster, checked by loading the app's own config spec from the environment
 * the workload gives it (ConfigMap, env, secret files, the pod's name). No pod mounts a volume another
 * pod can mount: a host's workspaces are on a claim of its own, objects in S3; the shared gpu-worker pool
 * mounts no claim at all (GPU tools get workspaces staged through S3). The KEDA triggers name the
 * code's topics, groups and shared task queues. A ServiceMonitor scrapes every container's health port
 * (GET /metrics), and the PrometheusRule is deploy/prometheus/rules.yml.
 *
 * kubectl is required: `bash deploy/k8s/validate.sh` (the manifests tier, which runs first) installs it.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { ConfigError, loadConfig, loadServiceConfig, type Env, type Spec } from '@agentrun/config';
import { TASK_QUEUES, TOPICS, WORKSPACE_HOST_PATTERN } from '@agentrun/contracts';
import { gatewaySpec } from '../../apps/gateway/src/config';
import { gpuWorkerSpec } from '../../apps/gpu-worker/src/config';
import { COMMAND_GROUP } from '../../apps/orchestrator/src/command-consumer';
import { orchestratorSpec } from '../../apps/orchestrator/src/config';
import { projectorSpec } from '../../apps/projector/src/config';
import { PROJECTOR_GROUP } from '../../apps/projector/src/run-event.projector';
import { snapshotterSpec } from '../../apps/snapshotter/src/config';

const REPO_ROOT = join(__dirname, '../..');
const OVERLAYS = ['local', 'production'] as const;
type Overlay = (typeof OVERLAYS)[number];

/* eslint-disable @typescript-eslint/no-explicit-any -- rendered YAML is untyped; each check reads the fields it needs */
type K8sObject = Record<string, any>;

interface App {
  app: string;
  spec: Spec;
  host: string;
  port: string;
  role?: 'commands' | 'workflows' | 'cpu-tools';
}

interface Workload {
  kind: 'Deployment' | 'StatefulSet';
  /** Each container's name and the app it runs. */
  containers: Record<string, App>;
  /** A workspace host: its containers are named after the pod and share the pod's own workspace claim. */
  workspaceHost?: boolean;
}

const GATEWAY: App = { app: 'gateway', spec: gatewaySpec, host: 'GATEWAY_HOST', port: 'GATEWAY_PORT' };
const orchestrator = (role: App['role']): App => ({ app: 'orchestrator', spec: orchestratorSpec, host: 'ORCHESTRATOR_HOST', port: 'ORCHESTRATOR_PORT', role });

/** Every workload the manifests must have, and the app each of its containers runs. */
const WORKLOADS: Record<string, Workload> = {
  gateway: { kind: 'Deployment', containers: { gateway: GATEWAY } },
  'orchestrator-commands': { kind: 'Deployment', containers: { 'orchestrator-commands': orchestrator('commands') } },
  'orchestrator-workflows': { kind: 'Deployment', containers: { 'orchestrator-workflows': orchestrator('workflows') } },
  projector: { kind: 'Deployment', containers: { projector: { app: 'projector', spec: projectorSpec, host: 'PROJECTOR_HOST', port: 'PROJECTOR_PORT' } } },
  // The shared GPU pool: not a workspace host (GPU tools run on workspaces staged through S3).
  'gpu-worker': { kind: 'Deployment', containers: { 'gpu-worker': { app: 'gpu-worker', spec: gpuWorkerSpec, host: 'GPU_WORKER_HOST', port: 'GPU_WORKER_PORT' } } },
  'workspace-host': {
    kind: 'StatefulSet',
    workspaceHost: true,
    containers: {
      orchestrator: orchestrator('cpu-tools'),
      snapshotter: { app: 'snapshotter', spec: snapshotterSpec, host: 'SNAPSHOTTER_HOST', port: 'SNAPSHOTTER_PORT' },
    },
  },
};
/** Every (workload, container) pair, for one test each. */
const CONTAINERS: [string, string][] = Object.entries(WORKLOADS).flatMap(([name, w]) => Object.keys(w.containers).map((c): [string, string] => [name, c]));

/**
 * Settings the other parts of this change add to the libs' groups (Kafka security and topics,
 * Temporal TLS, Postgres TLS and migrations, orchestrator roles). Until every spec declares them they
 * are known here, so a misspelt key in the manifests still fails.
 */
const AGREED_SETTINGS = [
  'KAFKA_GROUP_ID', 'KAFKA_SECURITY_PROTOCOL', 'KAFKA_SASL_MECHANISM', 'KAFKA_SASL_USERNAME', 'KAFKA_SASL_PASSWORD',
  'KAFKA_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL', 'KAFKA_SASL_OAUTHBEARER_CLIENT_ID', 'KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET',
  'KAFKA_SASL_OAUTHBEARER_SCOPE', 'KAFKA_SSL_CA_FILE', 'KAFKA_SSL_CERT_FILE', 'KAFKA_SSL_KEY_FILE', 'KAFKA_SSL_KEY_PASSWORD',
  'KAFKA_TOPIC_PARTITIONS', 'KAFKA_REPLICATION_FACTOR', 'KAFKA_MIN_INSYNC_REPLICAS', 'KAFKA_RETENTION_MS', 'KAFKA_TOPICS_CHECK',
  'TEMPORAL_API_KEY', 'TEMPORAL_TLS', 'TEMPORAL_TLS_SERVER_CA_CERT_PATH', 'TEMPORAL_TLS_CLIENT_CERT_PATH',
  'TEMPORAL_TLS_CLIENT_KEY_PATH', 'TEMPORAL_TLS_SERVER_NAME', 'TEMPORAL_TLS_DISABLE_HOST_VERIFICATION', 'TEMPORAL_CHECK_SEARCH_ATTRIBUTES',
  'DATABASE_PASSWORD', 'DATABASE_SSLMODE', 'DATABASE_SSL_CA_FILE', 'DATABASE_SSL_CERT_FILE', 'DATABASE_SSL_KEY_FILE',
  'DATABASE_STATEMENT_TIMEOUT_MS', 'DATABASE_MIGRATE', 'ORCHESTRATOR_ROLES',
];
/** Secrets that may also come from a file named by KEY_FILE. */
const SECRET_SETTINGS = ['KAFKA_SASL_PASSWORD', 'KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET', 'KAFKA_SSL_KEY_PASSWORD', 'TEMPORAL_API_KEY', 'DATABASE_PASSWORD', 'CURSOR_SECRET', 'AGENTRUN_EVENT_KEYS'];
/** What an operator's Secret holds for settings with a form of their own (any value of that form stands in). */
const OPERATOR_VALUES: Record<string, string> = { AGENTRUN_EVENT_KEYS: `k1:${'0123456789abcdef'.repeat(4)}` };
/** Read by the AWS SDK's default credential chain, not by our specs. */
const AWS_SETTINGS = /^AWS_/;
const KNOWN_SETTINGS = new Set([
  ...Object.values(WORKLOADS).flatMap((w) => Object.values(w.containers).flatMap((c) => Object.keys(c.spec))),
  ...AGREED_SETTINGS,
  ...SECRET_SETTINGS.map((key) => `${key}_FILE`),
]);

/** The machine's kubectl, else the one deploy/k8s/validate.sh installs into its venv where the machine has none. */
const KUBECTLS = ['kubectl', join(REPO_ROOT, '.stack/opt/kubernetes-validate-venv/bin/kubectl')];

function render(overlay: Overlay): K8sObject[] {
  const dir = join(REPO_ROOT, 'deploy/k8s/overlays', overlay);
  for (const kubectl of KUBECTLS) {
    let out: string;
    try {
      out = execFileSync(kubectl, ['kustomize', dir], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw err;
    }
    return parseAllDocuments(out)
      .map((doc) => doc.toJS() as K8sObject | null)
      .filter((obj): obj is K8sObject => obj !== null);
  }
  throw new Error('kubectl is not installed: `bash deploy/k8s/validate.sh` (the manifests tier) installs it');
}

const rendered = new Map<Overlay, K8sObject[]>();
function objectsOf(overlay: Overlay): K8sObject[] {
  if (!rendered.has(overlay)) rendered.set(overlay, render(overlay));
  return rendered.get(overlay)!;
}
const find = (objects: K8sObject[], kind: string, name: string) => objects.find((o) => o.kind === kind && o.metadata?.name === name);

/** A name the workload's pods get: a StatefulSet's are `<name>-<ordinal>`, a Deployment's `<name>-<hash>-<suffix>`. */
const podNameOf = (workload: K8sObject, ordinal = 0): string =>
  workload.kind === 'StatefulSet' ? `${workload.metadata.name}-${ordinal}` : `${workload.metadata.name}-5d9c7b8f4-x2x7k`;

/**
 * The environment a container starts with: envFrom ConfigMaps first, then env (which wins). Secret values
 * resolve where the overlay renders the Secret; `metadata.name` from the downward API is a pod name of the workload.
 */
function environmentOf(objects: K8sObject[], container: K8sObject, podName = 'pod-0'): { env: Env; fromSecret: Map<string, string>; fromField: Map<string, string> } {
  const env: Env = {};
  const fromSecret = new Map<string, string>();
  const fromField = new Map<string, string>();
  for (const source of container.envFrom ?? []) {
    const map = source.configMapRef ? find(objects, 'ConfigMap', source.configMapRef.name) : undefined;
    if (source.configMapRef && !map) throw new Error(`envFrom names a missing ConfigMap ${source.configMapRef.name}`);
    Object.assign(env, map?.data ?? {});
  }
  for (const entry of container.env ?? []) {
    const field = entry.valueFrom?.fieldRef?.fieldPath;
    if (field) {
      fromField.set(entry.name, field);
      env[entry.name] = field === 'metadata.name' ? podName : `value of ${field}`;
      continue;
    }
    const ref = entry.valueFrom?.secretKeyRef;
    if (!ref) {
      env[entry.name] = entry.value ?? '';
      continue;
    }
    fromSecret.set(entry.name, `${ref.name}/${ref.key}`);
    const secret = find(objects, 'Secret', ref.name);
    const value = secret?.data?.[ref.key] ?? secret?.stringData?.[ref.key];
    // A Secret the overlay does not render is created by the operator: any non-empty value stands in.
    if (secret) env[entry.name] = value === undefined ? undefined : secret.data ? Buffer.from(value, 'base64').toString('utf8') : value;
    else if (!ref.optional) env[entry.name] = OPERATOR_VALUES[entry.name] ?? `value of ${ref.name}/${ref.key}`;
  }
  return { env, fromSecret, fromField };
}

/** Secret names behind a volume (a secret or a projection of secrets), or undefined for any other kind. */
function secretsOfVolume(volume: K8sObject): string[] | undefined {
  if (volume.secret) return [volume.secret.secretName];
  if (volume.projected) {
    const sources: K8sObject[] = volume.projected.sources ?? [];
    return sources.every((s) => s.secret) ? sources.map((s) => s.secret.name) : undefined;
  }
  return undefined;
}

/**
 * Paths set in the environment that point into a mounted Secret are swapped for temporary files, so
 * the specs' file readers (secret(), readableFile()) read something. The content is the Secret's value
 * where the overlay renders it; the key must exist there.
 */
function withSecretFiles(objects: K8sObject[], pod: K8sObject, container: K8sObject, env: Env, dir: string, problems: string[]): Env {
  const out: Env = { ...env };
  for (const [key, value] of Object.entries(env)) {
    if (!value || !value.startsWith('/')) continue;
    const mount = (container.volumeMounts ?? []).find((m: K8sObject) => value.startsWith(`${m.mountPath}/`));
    const volume = mount && (pod.volumes ?? []).find((v: K8sObject) => v.name === mount.name);
    const secrets: string[] | undefined = volume ? secretsOfVolume(volume) : undefined;
    if (!secrets) {
      if (/_(FILE|PATH)$/.test(key) && key !== 'WORKFLOW_BUNDLE_PATH') problems.push(`${key}=${value} is not in a mounted Secret`);
      continue;
    }
    const name = relative(mount.mountPath, value);
    const rendered = secrets.map((s) => find(objects, 'Secret', s)).filter((s): s is K8sObject => s !== undefined);
    const holder = rendered.find((s) => s.data?.[name] !== undefined);
    // When the overlay renders every Secret the pod requires, what it renders is what the pod gets.
    const required: string[] = volume.secret ? [volume.secret.secretName] : volume.projected.sources.filter((s: K8sObject) => !s.secret.optional).map((s: K8sObject) => s.secret.name);
    if (!holder && required.every((s) => rendered.some((r) => r.metadata.name === s))) problems.push(`${key}=${value}: no Secret mounted there has the key ${name}`);
    const file = join(dir, key);
    writeFileSync(file, holder ? Buffer.from(holder.data[name], 'base64') : `example content of ${name}\n`);
    out[key] = file;
  }
  return out;
}

const isLoopback = (value: unknown): boolean =>
  (Array.isArray(value) ? value : [value]).some((v) => typeof v === 'string' && /(^|[/@:])(127\.0\.0\.1|localhost)([:/]|$)/.test(v));

/**
 * Every problem with one container of a workload as rendered in one overlay; empty when it is right.
 * On a workspace host, the container is named after its pod and keeps WORKSPACE_ROOT on the pod's own claim.
 */
function problemsOfContainer(objects: K8sObject[], workload: K8sObject, containerName: string, app: App, workspaceHost = false): string[] {
  const problems: string[] = [];
  const pod = workload.spec?.template?.spec ?? {};
  const container: K8sObject | undefined = (pod.containers ?? []).find((c: K8sObject) => c.name === containerName);
  if (!container) return [`has no container ${containerName}`];

  const command = [...(container.command ?? []), ...(container.args ?? [])];
  if (command.join(' ') !== `node apps/${app.app}/dist/main.js`) problems.push(`runs '${command.join(' ')}', expected 'node apps/${app.app}/dist/main.js'`);

  const { env, fromField } = environmentOf(objects, container, podNameOf(workload));
  for (const key of Object.keys(env)) {
    if (!KNOWN_SETTINGS.has(key) && !AWS_SETTINGS.test(key)) problems.push(`sets ${key}, which no service reads`);
  }
  if (env.AGENTRUN_MODE !== 'production') problems.push(`AGENTRUN_MODE is '${env.AGENTRUN_MODE}', expected production`);
  if (env[app.host] !== '0.0.0.0') problems.push(`${app.host} is '${env[app.host]}', expected 0.0.0.0`);
  if (app.role && env.ORCHESTRATOR_ROLES !== app.role) problems.push(`ORCHESTRATOR_ROLES is '${env.ORCHESTRATOR_ROLES}', expected ${app.role}`);
  if (env.DATABASE_URL && new URL(env.DATABASE_URL).password) problems.push('DATABASE_URL carries a password; it belongs in DATABASE_PASSWORD_FILE');
  if (env.DATABASE_URL && !env.DATABASE_PASSWORD && !env.DATABASE_PASSWORD_FILE) problems.push('no DATABASE_PASSWORD_FILE');
  // Objects must be where every host and the gateway reach them: a bucket, never a directory.
  if ('OBJECT_STORE_S3_BUCKET' in app.spec && !env.OBJECT_STORE_S3_BUCKET) problems.push('keeps objects in a directory (OBJECT_STORE_S3_BUCKET is empty); a cluster needs S3');
  if (workspaceHost) {
    if (fromField.get('AGENTRUN_WORKSPACE_HOST_ID') !== 'metadata.name') problems.push('AGENTRUN_WORKSPACE_HOST_ID is not the pod name (fieldRef metadata.name)');
    if (!new RegExp(WORKSPACE_HOST_PATTERN).test(podNameOf(workload, 999))) problems.push(`pod names like ${podNameOf(workload, 999)} do not match ${WORKSPACE_HOST_PATTERN}`);
  } else if (env.AGENTRUN_WORKSPACE_HOST_ID !== undefined) {
    problems.push('sets AGENTRUN_WORKSPACE_HOST_ID, but is not a workspace host');
  }

  // The settings a cluster must give: every default that points at this machine, and every secret with a default.
  const defaults = loadConfig(app.spec, {}) as Record<string, unknown>;
  for (const [key, value] of Object.entries(defaults)) {
    const isSecret = /SECRET|PASSWORD|API_KEY/.test(key) && typeof value === 'string' && value !== '';
    if (!isLoopback(value) && !isSecret) continue;
    if (env[key] === undefined && env[`${key}_FILE`] === undefined) problems.push(`does not set ${key} (its default only works on a developer's machine)`);
    else if (env[key] !== undefined && (isLoopback(env[key]) || env[key] === value)) problems.push(`${key} is still the local default '${env[key]}'`);
  }

  const dir = mkdtempSync(join(tmpdir(), 'k8s-env-'));
  try {
    const config = loadServiceConfig(app.spec, withSecretFiles(objects, pod, container, env, dir, problems)) as Record<string, any>;
    const appPort = String(config[app.port]);
    const portOf = (port: unknown) => String(typeof port === 'number' ? port : (container.ports ?? []).find((p: K8sObject) => p.name === port)?.containerPort);
    for (const [probe, path] of [['livenessProbe', '/livez'], ['readinessProbe', '/readyz']] as const) {
      const get = container[probe]?.httpGet;
      if (!get) problems.push(`has no ${probe}`);
      else if (get.path !== path || portOf(get.port) !== appPort) problems.push(`${probe} is ${get.path} on port ${portOf(get.port)}, expected ${path} on ${app.port} ${appPort}`);
    }
    if (!((pod.terminationGracePeriodSeconds ?? 30) * 1000 > config.SHUTDOWN_GRACE_MS)) {
      problems.push(`terminationGracePeriodSeconds ${pod.terminationGracePeriodSeconds ?? 30} is not above SHUTDOWN_GRACE_MS ${config.SHUTDOWN_GRACE_MS}`);
    }
    if (workspaceHost) {
      const claims = new Set((workload.spec?.volumeClaimTemplates ?? []).map((t: K8sObject) => t.metadata?.name));
      const mount = (container.volumeMounts ?? []).find((m: K8sObject) => m.mountPath === config.WORKSPACE_ROOT);
      if (!mount || !claims.has(mount.name)) problems.push(`WORKSPACE_ROOT ${config.WORKSPACE_ROOT} is not the mount of one of the pod's own claims`);
    }
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    problems.push(...err.problems.map((p) => `config: ${p}`));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }

  for (const kind of ['requests', 'limits'] as const) {
    for (const resource of ['cpu', 'memory']) {
      if (!container.resources?.[kind]?.[resource]) problems.push(`has no ${resource} ${kind}`);
    }
  }
  const context = container.securityContext ?? {};
  if (pod.securityContext?.runAsNonRoot !== true) problems.push('runAsNonRoot is not set on the pod');
  if (!(pod.securityContext?.runAsUser > 0)) problems.push('runAsUser is not a non-root uid');
  if (context.allowPrivilegeEscalation !== false) problems.push('allows privilege escalation');
  if (context.readOnlyRootFilesystem !== true) problems.push('root filesystem is writable');
  if (!context.capabilities?.drop?.includes('ALL')) problems.push('does not drop ALL capabilities');
  return problems;
}

/** Volume kinds that belong to one pod and nothing else: a pod may have these, and no other. */
const POD_OWN_VOLUMES = ['secret', 'projected', 'configMap', 'emptyDir', 'downwardAPI'];
/** Access modes a claim of one pod may have. */
const SINGLE_POD_MODES = ['ReadWriteOnce', 'ReadWriteOncePod'];

/** The pod spec of any object that makes pods (Deployment, StatefulSet, Job, DaemonSet, ...), or of a bare Pod. */
const podSpecOf = (o: K8sObject): K8sObject | undefined => (o.kind === 'Pod' ? o.spec : o.spec?.template?.spec);

/**
 * Every way an object could put a volume in reach of more than one workload: a standalone claim (any pod
 * may name it) or one that is ReadWriteMany, a pod volume that is not the pod's own (a claim, NFS, a host
 * path, ...), a StatefulSet's per-pod claim that more than one node could mount.
 */
function sharedVolumeProblems(o: K8sObject): string[] {
  const name = `${o.kind} ${o.metadata?.name}`;
  const problems: string[] = [];
  if (o.kind === 'PersistentVolumeClaim') problems.push(`${name}: a standalone claim (${(o.spec?.accessModes ?? []).join(',')}) any pod may mount`);
  if (o.kind === 'PersistentVolume') problems.push(`${name}: a volume outside any pod's own claims`);
  for (const volume of podSpecOf(o)?.volumes ?? []) {
    const kinds = Object.keys(volume).filter((k) => k !== 'name');
    if (!kinds.every((k) => POD_OWN_VOLUMES.includes(k))) problems.push(`${name}: volume ${volume.name} is ${kinds.join(',')}, which another pod can mount`);
  }
  for (const template of o.spec?.volumeClaimTemplates ?? []) {
    const modes: string[] = template.spec?.accessModes ?? [];
    if (modes.length === 0 || !modes.every((m) => SINGLE_POD_MODES.includes(m))) problems.push(`${name}: claim template ${template.metadata?.name} is ${modes.join(',')}`);
  }
  return problems;
}

describe.each(OVERLAYS)('the %s overlay', (overlay) => {
  const workloads = () => objectsOf(overlay).filter((o) => o.kind === 'Deployment' || o.kind === 'StatefulSet');

  it('has exactly one workload per app and orchestrator role, the workspace hosts one StatefulSet', () => {
    const kinds = (list: [string, string][]) => list.sort(([a], [b]) => a.localeCompare(b));
    expect(kinds(workloads().map((w) => [w.metadata.name, w.kind]))).toEqual(kinds(Object.entries(WORKLOADS).map(([name, w]) => [name, w.kind])));
    for (const [name, expected] of Object.entries(WORKLOADS)) {
      const containers = find(objectsOf(overlay), expected.kind, name)?.spec.template.spec.containers.map((c: K8sObject) => c.name);
      expect({ name, containers }).toEqual({ name, containers: Object.keys(expected.containers) });
    }
  });

  it.each(CONTAINERS)('%s, container %s: probes on its port, resources, non-root, grace period, and every setting its app needs', (name, container) => {
    const workload = find(objectsOf(overlay), WORKLOADS[name].kind, name);
    expect(workload).toBeDefined();
    expect(problemsOfContainer(objectsOf(overlay), workload!, container, WORKLOADS[name].containers[container], WORKLOADS[name].workspaceHost)).toEqual([]);
  });

  it("gives each container of a pod its own port", () => {
    for (const workload of workloads()) {
      const ports = workload.spec.template.spec.containers.flatMap((c: K8sObject) => (c.ports ?? []).map((p: K8sObject) => p.containerPort));
      expect({ name: workload.metadata.name, ports }).toEqual({ name: workload.metadata.name, ports: [...new Set(ports)] });
    }
  });

  it('mounts no volume that another workload can mount: no standalone or ReadWriteMany claim, no shared disk in any pod', () => {
    expect(objectsOf(overlay).flatMap(sharedVolumeProblems)).toEqual([]);
    const claims = objectsOf(overlay).flatMap((o) => [
      ...(o.kind === 'PersistentVolumeClaim' ? [o.spec] : []),
      ...(o.spec?.volumeClaimTemplates ?? []).map((t: K8sObject) => t.spec),
    ]);
    expect(claims.filter((c) => (c.accessModes ?? []).includes('ReadWriteMany'))).toEqual([]);
  });

  it("gives each workspace host one claim of its own for WORKSPACE_ROOT, mounted by the host's two containers and no other", () => {
    for (const [name, expected] of Object.entries(WORKLOADS).filter(([, w]) => w.workspaceHost)) {
      const host = find(objectsOf(overlay), 'StatefulSet', name)!;
      const claims = host.spec.volumeClaimTemplates.map((t: K8sObject) => t.metadata.name);
      expect(claims).toHaveLength(1);
      const mounts = host.spec.template.spec.containers.map((c: K8sObject) => {
        const { env } = environmentOf(objectsOf(overlay), c, podNameOf(host));
        const mount = (c.volumeMounts ?? []).find((m: K8sObject) => claims.includes(m.name));
        return { container: c.name, root: env.WORKSPACE_ROOT, claim: mount?.name, path: mount?.mountPath, subPath: mount?.subPath };
      });
      expect(mounts).toEqual(Object.keys(expected.containers).map((container) => ({ ...mounts[0], container })));
      expect(mounts[0].path).toBe(mounts[0].root);
      // The headless Service that gives the hosts their stable names.
      const service = find(objectsOf(overlay), 'Service', host.spec.serviceName);
      expect(service?.spec.clusterIP).toBe('None');
    }
  });

  it('runs the GPU workers as their own Deployment with no workspace volume: no claim, nothing at WORKSPACE_ROOT', () => {
    const deployment = find(objectsOf(overlay), 'Deployment', 'gpu-worker')!;
    const pod = deployment.spec.template.spec;
    expect(pod.volumes.filter((v: K8sObject) => v.persistentVolumeClaim || v.ephemeral)).toEqual([]);
    expect(deployment.spec.volumeClaimTemplates).toBeUndefined();
    const [container] = pod.containers;
    const { env } = environmentOf(objectsOf(overlay), container);
    expect(container.volumeMounts.filter((m: K8sObject) => m.mountPath === env.WORKSPACE_ROOT || m.mountPath.startsWith(`${env.WORKSPACE_ROOT}/`))).toEqual([]);
    expect(env.AGENTRUN_WORKSPACE_HOST_ID).toBeUndefined();
    // Staged workspaces reach it through S3, as they reach every other workload.
    expect(env.OBJECT_STORE_S3_BUCKET).toBeTruthy();
  });

  it('gives each workload a PodDisruptionBudget and a Service that select its pods', () => {
    for (const workload of workloads()) {
      const labels = workload.spec.template.metadata.labels;
      const selects = (selector: Record<string, string> = {}) => Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels[k] === v);
      const name = workload.metadata.name;
      expect({ name, pdb: objectsOf(overlay).some((o) => o.kind === 'PodDisruptionBudget' && selects(o.spec.selector?.matchLabels)) }).toEqual({ name, pdb: true });
      expect({ name, service: objectsOf(overlay).some((o) => o.kind === 'Service' && selects(o.spec.selector)) }).toEqual({ name, service: true });
    }
  });

  it("has Prometheus scrape every container's health port: a ServiceMonitor endpoint on /metrics through a Service port, job agentrun, a component label", () => {
    const objects = objectsOf(overlay);
    const monitors = objects.filter((o) => o.kind === 'ServiceMonitor');
    const scraped: string[] = [];
    for (const workload of workloads()) {
      const labels = workload.spec.template.metadata.labels;
      const selects = (selector: Record<string, string> = {}, on: Record<string, string> = labels) =>
        Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => on[k] === v);
      for (const container of workload.spec.template.spec.containers as K8sObject[]) {
        const id = `${workload.metadata.name}/${container.name}`;
        // The health port is the one its readiness probe asks (where GET /metrics is served too).
        const probePort = container.readinessProbe.httpGet.port;
        const portName = (container.ports as K8sObject[]).find((p) => p.name === probePort || p.containerPort === probePort)?.name;
        const service = objects.find((o) => o.kind === 'Service' && selects(o.spec.selector) && o.spec.ports.some((p: K8sObject) => p.targetPort === portName));
        expect({ id, service: service?.metadata.name }).toEqual({ id, service: expect.any(String) });
        const servicePort = service!.spec.ports.find((p: K8sObject) => p.targetPort === portName).name;
        const found = monitors.flatMap((m) =>
          selects(m.spec.selector.matchLabels, service!.metadata.labels) ? (m.spec.endpoints as K8sObject[]).filter((e) => e.port === servicePort).map((e) => ({ m, e })) : [],
        );
        expect({ id, monitors: found.length }).toEqual({ id, monitors: 1 });
        const [{ m, e }] = found;
        expect({ id, path: e.path, job: service!.metadata.labels[m.spec.jobLabel] }).toEqual({ id, path: '/metrics', job: 'agentrun' });
        expect({ id, component: (e.relabelings ?? []).some((r: K8sObject) => r.targetLabel === 'component' && r.replacement) }).toEqual({ id, component: true });
        scraped.push(id);
      }
    }
    expect(scraped.length).toBe(CONTAINERS.length);
    // Every endpoint scrapes something: no ServiceMonitor port that no Service has.
    for (const m of monitors) {
      const services = objects.filter((o) => o.kind === 'Service' && Object.entries(m.spec.selector.matchLabels).every(([k, v]) => o.metadata.labels?.[k] === v));
      for (const e of m.spec.endpoints) expect({ monitor: m.metadata.name, port: e.port, served: services.some((s) => s.spec.ports.some((p: K8sObject) => p.name === e.port)) }).toEqual({ monitor: m.metadata.name, port: e.port, served: true });
    }
  });

  it('carries the alerts of deploy/prometheus/rules.yml as a PrometheusRule', () => {
    const rule = find(objectsOf(overlay), 'PrometheusRule', 'agentrun');
    const local = parseAllDocuments(readFileSync(join(REPO_ROOT, 'deploy/prometheus/rules.yml'), 'utf8'))[0].toJS() as K8sObject;
    expect(rule?.spec.groups).toEqual(local.groups);
  });

  it("points the workflow workers at the bundle the image's build writes", () => {
    const { env } = environmentOf(objectsOf(overlay), find(objectsOf(overlay), 'Deployment', 'orchestrator-workflows')!.spec.template.spec.containers[0]);
    expect(readFileSync(join(REPO_ROOT, 'Dockerfile'), 'utf8')).toMatch(/^WORKDIR \/app$/m);
    expect(readFileSync(join(REPO_ROOT, 'tools/bundle-workflows.js'), 'utf8')).toContain("'../libs/workflows/dist/workflow-bundle.js'");
    expect(env.WORKFLOW_BUNDLE_PATH).toBe('/app/libs/workflows/dist/workflow-bundle.js');
  });

  it('runs the migrations and the topics as Jobs', () => {
    const commands = objectsOf(overlay)
      .filter((o) => o.kind === 'Job')
      .map((job) => job.spec.template.spec.containers[0].command.join(' '));
    expect(commands.sort()).toEqual(['node tools/migrate.js', 'node tools/topics.js apply']);
  });
});

/** KEDA's kafka scaler names the SASL mechanisms its own way. */
const KEDA_SASL: Record<string, string> = { PLAIN: 'plaintext', 'SCRAM-SHA-256': 'scram_sha256', 'SCRAM-SHA-512': 'scram_sha512', OAUTHBEARER: 'oauthbearer' };

describe('the production overlay', () => {
  const objects = () => objectsOf('production');
  const scaledObjects = () => objects().filter((o) => o.kind === 'ScaledObject');
  const targetOf = (scaled: K8sObject): K8sObject | undefined => find(objects(), scaled.spec.scaleTargetRef.kind ?? 'Deployment', scaled.spec.scaleTargetRef.name);
  const envOfTarget = (scaled: K8sObject): Env => {
    const target = targetOf(scaled);
    expect(target).toBeDefined();
    return environmentOf(objects(), target!.spec.template.spec.containers[0], podNameOf(target!)).env;
  };

  it('scales the command consumer and the projector on their own group and topic', () => {
    const expected = {
      'orchestrator-commands': { group: COMMAND_GROUP, topic: TOPICS.commands },
      projector: { group: PROJECTOR_GROUP, topic: TOPICS.runEvents },
    };
    for (const [name, { group, topic }] of Object.entries(expected)) {
      const scaled = find(objects(), 'ScaledObject', name);
      expect(scaled?.spec.scaleTargetRef.name).toBe(name);
      const env = envOfTarget(scaled!);
      const triggers = scaled!.spec.triggers;
      expect(triggers.map((t: K8sObject) => t.type)).toEqual(['kafka']);
      const [{ metadata, authenticationRef }] = triggers;
      expect({ name, group: metadata.consumerGroup, topic: metadata.topic }).toEqual({ name, group: env.KAFKA_GROUP_ID ?? group, topic });
      expect(env[metadata.bootstrapServersFromEnv] ?? metadata.bootstrapServers).toBe(env.KAFKA_BROKERS);
      // KEDA reaches the brokers the way the service does.
      const protocol = env.KAFKA_SECURITY_PROTOCOL ?? 'PLAINTEXT';
      expect({ name, tls: metadata.tls === 'enable' }).toEqual({ name, tls: protocol.endsWith('SSL') });
      const sasl = protocol.startsWith('SASL') ? KEDA_SASL[env.KAFKA_SASL_MECHANISM ?? ''] : undefined;
      expect({ name, sasl: metadata.sasl }).toEqual({ name, sasl });
      // Production reaches Kafka secured, so KEDA needs the credentials: a TriggerAuthentication the trigger names.
      expect({ name, secured: protocol !== 'PLAINTEXT' }).toEqual({ name, secured: true });
      expect(find(objects(), 'TriggerAuthentication', authenticationRef?.name)).toBeDefined();
    }
  });

  it("scales the workflow workers, the workspace hosts and the GPU workers on shared task queues in the services' namespace", () => {
    // A host's own queues (cpu-tools@<host>, snapshots@<host>) only hold work of runs already on it:
    // the hosts scale on the shared cpu-tools queue, where new runs claim a host. The GPU workers serve
    // the shared gpu-tools (every host's GPU tools) and gpu-eval queues.
    const expected: Record<string, string[]> = {
      'orchestrator-workflows': [TASK_QUEUES.agentWorkflows],
      'workspace-host': [TASK_QUEUES.cpuTools],
      'gpu-worker': [TASK_QUEUES.gpuTools, TASK_QUEUES.gpuEval],
    };
    for (const [name, queues] of Object.entries(expected)) {
      const scaled = find(objects(), 'ScaledObject', name);
      expect(scaled?.spec.scaleTargetRef.name).toBe(name);
      const env = envOfTarget(scaled!);
      const triggers: K8sObject[] = scaled!.spec.triggers;
      expect({ name, queues: triggers.map((t) => t.type === 'temporal' && t.metadata.taskQueue) }).toEqual({ name, queues });
      expect(Object.values(TASK_QUEUES)).toEqual(expect.arrayContaining(queues));
      for (const { metadata, authenticationRef } of triggers) {
        expect({ name, namespace: metadata.namespace }).toEqual({ name, namespace: env.TEMPORAL_NAMESPACE });
        expect(env[metadata.endpointFromEnv] ?? metadata.endpoint).toBe(env.TEMPORAL_ADDRESS);
        // Production reaches Temporal over TLS, so KEDA needs the client certificate: a TriggerAuthentication the trigger names.
        expect({ name, tls: env.TEMPORAL_TLS }).toEqual({ name, tls: 'true' });
        expect(find(objects(), 'TriggerAuthentication', authenticationRef?.name)).toBeDefined();
      }
    }
  });

  it('names a task queue or topic the code has in every KEDA trigger', () => {
    // Shared queues only: a host's own (cpu-tools@<host>, snapshots@<host>) say nothing about how many pods are needed.
    const sharedQueues: string[] = [TASK_QUEUES.agentWorkflows, TASK_QUEUES.cpuTools, TASK_QUEUES.gpuTools, TASK_QUEUES.gpuEval];
    expect(scaledObjects().length).toBeGreaterThan(0);
    for (const scaled of scaledObjects()) {
      for (const { type, metadata } of scaled.spec.triggers as K8sObject[]) {
        const name = scaled.metadata.name;
        // A temporal trigger names a shared queue; any other is a kafka one naming a topic of the code.
        const known = type === 'temporal' ? sharedQueues.includes(metadata.taskQueue) : type === 'kafka' && Object.values(TOPICS).includes(metadata.topic);
        expect({ name, type, queue: metadata.taskQueue, topic: metadata.topic, known }).toEqual({ name, type, queue: metadata.taskQueue, topic: metadata.topic, known: true });
      }
    }
  });

  it('leaves the replica count of every scaled workload to KEDA, and keeps at least two workspace hosts', () => {
    expect(scaledObjects().map((o) => o.metadata.name).sort()).toEqual(['gpu-worker', 'orchestrator-commands', 'orchestrator-workflows', 'projector', 'workspace-host']);
    for (const scaled of scaledObjects()) {
      const target = targetOf(scaled);
      expect({ name: scaled.metadata.name, found: target !== undefined, replicas: target?.spec.replicas }).toEqual({ name: scaled.metadata.name, found: true, replicas: undefined });
    }
    const hosts = find(objects(), 'ScaledObject', 'workspace-host')!;
    expect(hosts.spec.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'workspace-host' });
    // A host scaled away takes its workspaces with it (its runs move): never zero, and somewhere to move to.
    expect(hosts.spec.minReplicaCount).toBeGreaterThanOrEqual(2);
    expect(objects().filter((o) => o.kind === 'HorizontalPodAutoscaler')).toEqual([]);
  });

  it('puts the gpu-worker Deployment on GPU nodes only, and the workspace hosts on ordinary nodes', () => {
    const pod = find(objects(), 'Deployment', 'gpu-worker')!.spec.template.spec;
    expect(pod.containers[0].resources.limits['nvidia.com/gpu']).toBeGreaterThanOrEqual(1);
    expect(pod.tolerations).toEqual(expect.arrayContaining([expect.objectContaining({ key: 'nvidia.com/gpu', effect: 'NoSchedule' })]));
    expect(Object.keys(pod.nodeSelector ?? {})).not.toHaveLength(0);
    const host = find(objects(), 'StatefulSet', 'workspace-host')!.spec.template.spec;
    expect(host.nodeSelector).toBeUndefined();
    expect(host.tolerations).toBeUndefined();
    expect(host.containers.filter((c: K8sObject) => c.resources?.limits?.['nvidia.com/gpu'] !== undefined)).toEqual([]);
  });

  it('lets the GPU workers scale to zero (they hold no workspace)', () => {
    const gpu = find(objects(), 'ScaledObject', 'gpu-worker')!;
    expect(gpu.spec.scaleTargetRef.name).toBe('gpu-worker');
    expect(gpu.spec.minReplicaCount ?? 0).toBe(0);
  });
});

describe('the check itself', () => {
  // The checks above pass on the real manifests; these show that they fail when a workload loses something.
  const gateway = () => structuredClone(find(objectsOf('local'), 'Deployment', 'gateway')!);
  const problems = (deployment: K8sObject) => problemsOfContainer(objectsOf('local'), deployment, 'gateway', GATEWAY);
  const host = () => structuredClone(find(objectsOf('local'), 'StatefulSet', 'workspace-host')!);
  const hostProblems = (statefulSet: K8sObject, container: string) =>
    problemsOfContainer(objectsOf('local'), statefulSet, container, WORKLOADS['workspace-host'].containers[container], true);

  it('fails a Deployment that drops its readiness probe', () => {
    const deployment = gateway();
    delete deployment.spec.template.spec.containers[0].readinessProbe;
    expect(problems(deployment)).toEqual(['has no readinessProbe']);
  });

  it('fails a Deployment whose probe is on another port', () => {
    const deployment = gateway();
    deployment.spec.template.spec.containers[0].livenessProbe.httpGet.port = 9999;
    expect(problems(deployment)).toEqual([expect.stringMatching(/^livenessProbe is \/livez on port 9999, expected \/livez on GATEWAY_PORT 8080$/)]);
  });

  it('fails a Deployment that drops a setting its app needs in a cluster', () => {
    const deployment = gateway();
    const container = deployment.spec.template.spec.containers[0];
    container.env = container.env.filter((e: K8sObject) => !['GATEWAY_HOST', 'CURSOR_SECRET'].includes(e.name));
    expect(problems(deployment)).toEqual([
      "GATEWAY_HOST is 'undefined', expected 0.0.0.0",
      "does not set GATEWAY_HOST (its default only works on a developer's machine)",
      "does not set CURSOR_SECRET (its default only works on a developer's machine)",
      // And the gateway itself refuses to start so in production mode.
      'config: CURSOR_SECRET is the development default; production mode needs a secret of its own (CURSOR_SECRET or CURSOR_SECRET_FILE)',
    ]);
  });

  it('fails a Deployment with a value its app refuses, a misspelt setting, or a secret file that is not mounted', () => {
    const deployment = gateway();
    const container = deployment.spec.template.spec.containers[0];
    container.env.push({ name: 'SSE_KEEPALIVE_SECONDS', value: 'soon' }, { name: 'KAFKA_BROKER', value: 'kafka:9092' });
    container.env.find((e: K8sObject) => e.name === 'DATABASE_PASSWORD_FILE').value = '/etc/agentrun/db-password';
    expect(problems(deployment).sort()).toEqual([
      'DATABASE_PASSWORD_FILE=/etc/agentrun/db-password is not in a mounted Secret',
      // The app reads secret files at load, so it says so too.
      'config: DATABASE_PASSWORD_FILE: cannot read /etc/agentrun/db-password: ENOENT',
      "config: SSE_KEEPALIVE_SECONDS must be an integer, got 'soon'",
      'sets KAFKA_BROKER, which no service reads',
    ]);
  });

  it('fails a Deployment whose secret file names a key its Secret does not have', () => {
    const deployment = gateway();
    deployment.spec.template.spec.containers[0].env.find((e: K8sObject) => e.name === 'DATABASE_PASSWORD_FILE').value = '/var/run/secrets/agentrun/db-password';
    expect(problems(deployment)).toEqual(['DATABASE_PASSWORD_FILE=/var/run/secrets/agentrun/db-password: no Secret mounted there has the key db-password']);
  });

  it('fails a Deployment that runs as root or keeps its capabilities', () => {
    const deployment = gateway();
    delete deployment.spec.template.spec.securityContext.runAsNonRoot;
    delete deployment.spec.template.spec.containers[0].securityContext.capabilities;
    expect(problems(deployment)).toEqual(['runAsNonRoot is not set on the pod', 'does not drop ALL capabilities']);
  });

  it('fails a workspace host container that is not named after its pod, or keeps workspaces off its claim', () => {
    const statefulSet = host();
    const [orchestratorContainer, snapshotter] = statefulSet.spec.template.spec.containers;
    orchestratorContainer.env = orchestratorContainer.env.map((e: K8sObject) => (e.name === 'AGENTRUN_WORKSPACE_HOST_ID' ? { name: e.name, value: 'h1' } : e));
    snapshotter.volumeMounts = snapshotter.volumeMounts.filter((m: K8sObject) => m.name !== 'workspaces');
    expect(hostProblems(statefulSet, 'orchestrator')).toEqual(['AGENTRUN_WORKSPACE_HOST_ID is not the pod name (fieldRef metadata.name)']);
    expect(hostProblems(statefulSet, 'snapshotter')).toEqual(['WORKSPACE_ROOT /var/lib/agentrun/workspaces is not the mount of one of the pod\'s own claims']);
  });

  it('fails a workload that keeps objects in a directory or names itself a workspace host', () => {
    const deployment = gateway();
    deployment.spec.template.spec.containers[0].env.push({ name: 'OBJECT_STORE_S3_BUCKET', value: '' }, { name: 'AGENTRUN_WORKSPACE_HOST_ID', value: 'gw' });
    expect(problems(deployment)).toEqual([
      'keeps objects in a directory (OBJECT_STORE_S3_BUCKET is empty); a cluster needs S3',
      'sets AGENTRUN_WORKSPACE_HOST_ID, but is not a workspace host',
    ]);
  });

  it('fails a shared volume: a standalone or ReadWriteMany claim, a claim or NFS volume in a pod', () => {
    const deployment = gateway();
    deployment.spec.template.spec.volumes.push({ name: 'workspaces', persistentVolumeClaim: { claimName: 'agentrun-workspaces' } }, { name: 'nfs', nfs: { server: 'nfs', path: '/' } });
    const statefulSet = host();
    statefulSet.spec.volumeClaimTemplates[0].spec.accessModes = ['ReadWriteMany'];
    const claim = { kind: 'PersistentVolumeClaim', metadata: { name: 'agentrun-workspaces' }, spec: { accessModes: ['ReadWriteMany'] } };
    expect([deployment, statefulSet, claim].flatMap(sharedVolumeProblems)).toEqual([
      'Deployment gateway: volume workspaces is persistentVolumeClaim, which another pod can mount',
      'Deployment gateway: volume nfs is nfs, which another pod can mount',
      'StatefulSet workspace-host: claim template workspaces is ReadWriteMany',
      'PersistentVolumeClaim agentrun-workspaces: a standalone claim (ReadWriteMany) any pod may mount',
    ]);
  });
});
