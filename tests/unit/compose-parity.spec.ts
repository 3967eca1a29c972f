/**
 * docker-compose.yml must run the same stack as the native deploy/local/stack.sh: same ports, topics,
 * partitions, retention, search attributes, credentials. No Docker engine runs here, so this test is
 * what keeps the two in step: it reads both files (and the contracts) and compares.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { loadConfig, objectStoreSpec, runDefaultsSpec } from '@agentrun/config';
import { SEARCH_ATTRIBUTES, TOPICS } from '@agentrun/contracts';

const REPO_ROOT = join(__dirname, '..', '..');

/** The new DLQ topic the native stack.env must list too (it fails here until it does). */
const RUN_EVENTS_DLQ = 'agentrun.run-events.dlq.v1';

const APPS = {
  gateway: { portVar: 'GATEWAY_PORT', hostVar: 'GATEWAY_HOST' },
  orchestrator: { portVar: 'ORCHESTRATOR_PORT', hostVar: 'ORCHESTRATOR_HOST' },
  'gpu-worker': { portVar: 'GPU_WORKER_PORT', hostVar: 'GPU_WORKER_HOST' },
  projector: { portVar: 'PROJECTOR_PORT', hostVar: 'PROJECTOR_HOST' },
  snapshotter: { portVar: 'SNAPSHOTTER_PORT', hostVar: 'SNAPSHOTTER_HOST' },
} as const;
type AppName = keyof typeof APPS;

// ---------------------------------------------------------------------------------------------------
// deploy/local/stack.env: `KEY=${KEY:-default}` lines -> defaults (the environment is ignored on purpose:
// the files are compared, not this shell's overrides)
// ---------------------------------------------------------------------------------------------------
function readStackEnv(): Record<string, string> {
  const out: Record<string, string> = {};
  const text = readFileSync(join(REPO_ROOT, 'deploy/local/stack.env'), 'utf8');
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const m = /^([A-Z][A-Z0-9_]*)=\$\{([A-Z][A-Z0-9_]*):-(.*)\}$/.exec(line);
    if (!m || m[1] !== m[2]) continue;
    let value = m[3];
    if (value.length >= 2 && ((value.startsWith('"') && value.endsWith('"')) || (value.startsWith("'") && value.endsWith("'")))) {
      value = value.slice(1, -1);
    }
    out[m[1]] = value;
  }
  return out;
}

const words = (s: string): string[] => s.split(/\s+/).filter(Boolean);
const sorted = (xs: Iterable<string>): string[] => [...xs].sort();

// ---------------------------------------------------------------------------------------------------
// docker-compose.yml, read as `docker compose config` would: YAML merge keys resolved, then compose
// interpolation (`$$` -> `$`, `${VAR:-default}` -> default, since no .env/environment is assumed)
// ---------------------------------------------------------------------------------------------------
type Yaml = unknown;
interface Service {
  image?: string;
  build?: string | { context?: string; dockerfile?: string };
  command?: string | string[];
  entrypoint?: string | string[];
  environment?: Record<string, string | number | boolean | null> | string[];
  ports?: (string | number | { target: number; published?: string | number; host_ip?: string })[];
  volumes?: (string | { type?: string; source?: string; target: string })[];
  depends_on?: string[] | Record<string, { condition?: string }>;
  healthcheck?: { test?: string | string[] };
  secrets?: string[];
}
interface Compose {
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
  secrets?: Record<string, { file?: string }>;
}

function interpolate(value: string): string {
  return value.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (whole, _name, op, arg) => {
    if (whole === '$$') return '$';
    // Nothing is set, so only a `-` default yields a value.
    return op === '-' || op === ':-' ? (arg ?? '') : '';
  });
}

function interpolateAll(node: Yaml): Yaml {
  if (typeof node === 'string') return interpolate(node);
  if (Array.isArray(node)) return node.map(interpolateAll);
  if (node && typeof node === 'object') {
    return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, interpolateAll(v)]));
  }
  return node;
}

function readCompose(): Compose {
  const text = readFileSync(join(REPO_ROOT, 'docker-compose.yml'), 'utf8');
  return interpolateAll(parse(text, { merge: true })) as Compose;
}

function envOf(service: Service): Record<string, string> {
  const env = service.environment ?? {};
  if (Array.isArray(env)) {
    return Object.fromEntries(
      env.map((entry) => {
        const eq = entry.indexOf('=');
        return eq < 0 ? [entry, ''] : [entry.slice(0, eq), entry.slice(eq + 1)];
      }),
    );
  }
  return Object.fromEntries(Object.entries(env).map(([k, v]) => [k, v === null ? '' : String(v)]));
}

interface Published {
  hostIp?: string;
  host: number;
  container: number;
}

/** Short syntax `[IP:]HOST:CONTAINER[/proto]` (no ranges) or the long syntax. */
function portsOf(service: Service): Published[] {
  return (service.ports ?? []).map((p) => {
    if (typeof p === 'object') {
      return { hostIp: p.host_ip, host: Number(p.published ?? p.target), container: Number(p.target) };
    }
    const spec = String(p).replace(/\/(tcp|udp)$/, '');
    const parts = spec.split(':');
    if (parts.length === 1) return { host: Number(parts[0]), container: Number(parts[0]) };
    const container = Number(parts.pop());
    const host = Number(parts.pop());
    return { hostIp: parts.length ? parts.join(':') : undefined, host, container };
  });
}

function argv(value: string | string[] | undefined): string[] {
  if (value === undefined) return [];
  return Array.isArray(value) ? value.map(String) : words(value);
}

/** Values of a repeatable CLI flag, `--flag value` or `--flag=value`. */
function flagValues(args: string[], flag: string): string[] {
  const out: string[] = [];
  args.forEach((arg, i) => {
    if (arg === flag && i + 1 < args.length) out.push(args[i + 1]);
    else if (arg.startsWith(`${flag}=`)) out.push(arg.slice(flag.length + 1));
  });
  return out;
}

function dependsOn(service: Service): Record<string, string> {
  const deps = service.depends_on ?? {};
  if (Array.isArray(deps)) return Object.fromEntries(deps.map((d) => [d, 'service_started']));
  return Object.fromEntries(Object.entries(deps).map(([k, v]) => [k, v?.condition ?? 'service_started']));
}

/** `name:target` of each named-volume mount. */
function namedMounts(service: Service): { source: string; target: string }[] {
  return (service.volumes ?? []).flatMap((v) => {
    if (typeof v === 'object') return v.source && (v.type ?? 'volume') === 'volume' ? [{ source: v.source, target: v.target }] : [];
    const [source, target] = v.split(':');
    return target && !source.startsWith('.') && !source.startsWith('/') ? [{ source, target }] : [];
  });
}

// ---------------------------------------------------------------------------------------------------

describe('docker-compose.yml mirrors the native stack (deploy/local/stack.env)', () => {
  const stack = readStackEnv();
  const compose = readCompose();
  const services = compose.services;

  const service = (name: string): Service => {
    const s = services[name];
    if (!s) throw new Error(`docker-compose.yml has no service '${name}'`);
    return s;
  };

  it('reads the stack.env values it compares', () => {
    for (const key of [
      'KAFKA_PORT',
      'KAFKA_CONTROLLER_PORT',
      'KAFKA_TOPIC_PARTITIONS',
      'KAFKA_TOPICS',
      'KAFKA_COMPACTED_TOPICS',
      'KAFKA_RETENTION_MS',
      'KAFKA_MAX_MESSAGE_BYTES',
      'TEMPORAL_PORT',
      'TEMPORAL_UI_PORT',
      'TEMPORAL_NAMESPACE',
      'TEMPORAL_RETENTION',
      'TEMPORAL_SEARCH_ATTRIBUTES',
      'POSTGRES_PORT',
      'POSTGRES_USER',
      'POSTGRES_PASSWORD',
      'POSTGRES_DB',
      'GATEWAY_PORT',
    ]) {
      expect({ key, value: stack[key] }).toEqual({ key, value: expect.stringMatching(/\S/) });
    }
  });

  describe('published ports', () => {
    const expectPublished = (name: string, port: string) => {
      const match = portsOf(service(name)).filter((p) => p.host === Number(port));
      expect({ service: name, host: Number(port), published: match.map((p) => p.container) }).toEqual({
        service: name,
        host: Number(port),
        published: [Number(port)],
      });
    };

    it('kafka on KAFKA_PORT, advertised to the host as 127.0.0.1:KAFKA_PORT, controller on KAFKA_CONTROLLER_PORT', () => {
      expectPublished('kafka', stack.KAFKA_PORT);
      const env = envOf(service('kafka'));
      expect(env.KAFKA_ADVERTISED_LISTENERS.split(',')).toContain(`PLAINTEXT://127.0.0.1:${stack.KAFKA_PORT}`);
      expect(env.KAFKA_LISTENERS.split(',')).toContain(`PLAINTEXT://0.0.0.0:${stack.KAFKA_PORT}`);
      expect(env.KAFKA_LISTENERS.split(',')).toContain(`CONTROLLER://0.0.0.0:${stack.KAFKA_CONTROLLER_PORT}`);
      expect(env.KAFKA_CONTROLLER_QUORUM_VOTERS).toBe(`1@kafka:${stack.KAFKA_CONTROLLER_PORT}`);
    });

    it('temporal on TEMPORAL_PORT and its UI on TEMPORAL_UI_PORT, the same ports start-dev is given', () => {
      expectPublished('temporal', stack.TEMPORAL_PORT);
      expectPublished('temporal', stack.TEMPORAL_UI_PORT);
      const args = argv(service('temporal').command);
      expect(args.slice(0, 2)).toEqual(['server', 'start-dev']);
      expect(flagValues(args, '--port')).toEqual([stack.TEMPORAL_PORT]);
      expect(flagValues(args, '--ui-port')).toEqual([stack.TEMPORAL_UI_PORT]);
      expect(flagValues(args, '--ip')).toEqual(['0.0.0.0']);
      expect(flagValues(args, '--namespace')).toEqual([stack.TEMPORAL_NAMESPACE]);
      expect(flagValues(args, '--db-filename')).toEqual(['/data/temporal.db']);
      expect(flagValues(args, '--dynamic-config-value')).toContain('matching.enableFairness=true');
      expect(flagValues(args, '--sqlite-pragma')).toEqual(['journal_mode=wal', 'synchronous=normal']);
    });

    it('postgres on POSTGRES_PORT', () => {
      expectPublished('postgres', stack.POSTGRES_PORT);
    });

    it('gateway on GATEWAY_PORT', () => {
      expectPublished('gateway', stack.GATEWAY_PORT);
    });

    it('binds every published port to 127.0.0.1 on the host, as the native servers listen', () => {
      const open = Object.entries(services).flatMap(([name, s]) =>
        portsOf(s)
          .filter((p) => p.hostIp !== '127.0.0.1')
          .map((p) => `${name}:${p.host}`),
      );
      expect(open).toEqual([]);
    });
  });

  describe('kafka', () => {
    it("stack.env's KAFKA_TOPICS includes the run-events DLQ", () => {
      expect(words(stack.KAFKA_TOPICS)).toContain(RUN_EVENTS_DLQ);
    });

    it('kafka-init creates exactly the topics of stack.env, which are the contracts TOPICS', () => {
      const initTopics = words(envOf(service('kafka-init')).KAFKA_TOPICS ?? '');
      expect(new Set(initTopics).size).toBe(initTopics.length);
      expect(sorted(initTopics)).toEqual(sorted(new Set([...words(stack.KAFKA_TOPICS), RUN_EVENTS_DLQ])));
      expect(sorted(initTopics)).toEqual(sorted(Object.values(TOPICS)));
      expect(sorted(words(stack.KAFKA_TOPICS))).toEqual(sorted(Object.values(TOPICS)));
    });

    it('kafka-init compacts the topics stack.env compacts, the run-state topic among them', () => {
      const init = service('kafka-init');
      expect(sorted(words(envOf(init).KAFKA_COMPACTED_TOPICS ?? ''))).toEqual(sorted(words(stack.KAFKA_COMPACTED_TOPICS)));
      expect(words(stack.KAFKA_COMPACTED_TOPICS)).toContain(TOPICS.runState);
      const script = [...argv(init.entrypoint), ...argv(init.command)].join(' ');
      expect(script).toContain('$KAFKA_COMPACTED_TOPICS');
      expect(script).toContain('cleanup.policy=$policy');
    });

    it('kafka-init uses the partitions, retention.ms and max.message.bytes of stack.env', () => {
      const init = service('kafka-init');
      const env = envOf(init);
      expect({
        partitions: env.KAFKA_TOPIC_PARTITIONS,
        retentionMs: env.KAFKA_RETENTION_MS,
        maxMessageBytes: env.KAFKA_MAX_MESSAGE_BYTES,
      }).toEqual({
        partitions: stack.KAFKA_TOPIC_PARTITIONS,
        retentionMs: stack.KAFKA_RETENTION_MS,
        maxMessageBytes: stack.KAFKA_MAX_MESSAGE_BYTES,
      });
      // ... and its script really creates from those variables, against the kafka service.
      const script = [...argv(init.entrypoint), ...argv(init.command)].join(' ');
      expect(script).toContain('for t in $KAFKA_TOPICS');
      expect(script).toContain('--partitions "$KAFKA_TOPIC_PARTITIONS"');
      expect(script).toContain('--replication-factor 1');
      expect(script).toContain('retention.ms=$KAFKA_RETENTION_MS');
      expect(script).toContain('max.message.bytes=$KAFKA_MAX_MESSAGE_BYTES');
      expect(env.KAFKA_BOOTSTRAP).toBe('kafka:19092');
      expect(dependsOn(init)).toEqual({ kafka: 'service_healthy' });
    });

    it('the broker has the server settings stack.sh writes (auto-create off, partitions, sizes, RF 1)', () => {
      const env = envOf(service('kafka'));
      expect(service('kafka').image).toMatch(/^apache\/kafka:4\./);
      expect(env).toMatchObject({
        KAFKA_NODE_ID: '1',
        KAFKA_PROCESS_ROLES: 'broker,controller',
        KAFKA_CONTROLLER_LISTENER_NAMES: 'CONTROLLER',
        KAFKA_AUTO_CREATE_TOPICS_ENABLE: 'false',
        KAFKA_NUM_PARTITIONS: stack.KAFKA_TOPIC_PARTITIONS,
        KAFKA_MESSAGE_MAX_BYTES: stack.KAFKA_MAX_MESSAGE_BYTES,
        KAFKA_LOG_RETENTION_MS: stack.KAFKA_RETENTION_MS,
        KAFKA_DEFAULT_REPLICATION_FACTOR: '1',
        KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: '1',
        KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR: '1',
        KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS: '0',
      });
      expect(env.KAFKA_HEAP_OPTS).toMatch(/-Xmx\d+[mMgG]/);
      const listenerNames = env.KAFKA_LISTENERS.split(',').map((l) => l.split('://')[0]);
      const protocolMap = Object.fromEntries(env.KAFKA_LISTENER_SECURITY_PROTOCOL_MAP.split(',').map((kv) => kv.split(':')));
      for (const name of listenerNames) expect({ name, protocol: protocolMap[name] }).toEqual({ name, protocol: 'PLAINTEXT' });
    });
  });

  describe('temporal', () => {
    const expected = sorted(words(stack.TEMPORAL_SEARCH_ATTRIBUTES));

    it('start-dev registers the search attributes of stack.env', () => {
      expect(sorted(flagValues(argv(service('temporal').command), '--search-attribute'))).toEqual(expected);
    });

    it('temporal-init makes sure of the same search attributes, namespace and retention', () => {
      const init = service('temporal-init');
      const env = envOf(init);
      expect(sorted(words(env.TEMPORAL_SEARCH_ATTRIBUTES ?? ''))).toEqual(expected);
      expect(env.TEMPORAL_NAMESPACE).toBe(stack.TEMPORAL_NAMESPACE);
      expect(env.TEMPORAL_RETENTION).toBe(stack.TEMPORAL_RETENTION);
      expect(env.TEMPORAL_ADDRESS).toBe(`temporal:${stack.TEMPORAL_PORT}`);
      const script = [...argv(init.entrypoint), ...argv(init.command)].join(' ');
      expect(script).toContain('for spec in $TEMPORAL_SEARCH_ATTRIBUTES');
      expect(script).toContain('operator search-attribute create');
      expect(script).toContain('--retention "$TEMPORAL_RETENTION"');
      expect(script).toContain('already exists');
      expect(dependsOn(init)).toEqual({ temporal: 'service_healthy' });
    });

    it('the search attributes are the contracts SEARCH_ATTRIBUTES', () => {
      expect(sorted(Object.entries(SEARCH_ATTRIBUTES).map(([name, type]) => `${name}=${type}`))).toEqual(expected);
    });
  });

  describe('postgres', () => {
    it('has the user and database of stack.env, and its password from the secret make-secrets.sh writes', () => {
      const s = service('postgres');
      expect(s.image).toMatch(/^postgres:15(\.|-|$)/);
      expect(envOf(s)).toMatchObject({
        POSTGRES_USER: stack.POSTGRES_USER,
        POSTGRES_PASSWORD_FILE: '/run/secrets/database_password',
        POSTGRES_DB: stack.POSTGRES_DB,
      });
      expect(envOf(s).POSTGRES_PASSWORD).toBeUndefined();
      expect(s.secrets).toEqual(['database_password']);
      expect(compose.secrets?.database_password?.file).toBe('.stack/compose/secrets/database-password');
      expect(readFileSync(join(REPO_ROOT, 'deploy', 'compose', 'make-secrets.sh'), 'utf8')).toContain('for name in database-password cursor-secret command-key-secret');
    });
  });

  // Not in the native stack (it keeps objects in OBJECT_STORE_DIR), so compared within the compose file:
  // the apps must reach the MinIO service, with its credentials, in the bucket minio-init creates.
  describe('minio, the object store of the compose apps', () => {
    const S3_SETTINGS = Object.keys(objectStoreSpec).filter((k) => k.startsWith('OBJECT_STORE_S3_'));

    it('runs `server /data` on 9000 with its data on a named volume', () => {
      const minio = service('minio');
      expect(minio.image).toMatch(/^minio\/minio(:|$)/);
      expect(argv(minio.command).slice(0, 2)).toEqual(['server', '/data']);
      expect(portsOf(minio).map((p) => [p.host, p.container])).toContainEqual([9000, 9000]);
      expect(namedMounts(minio).map((m) => m.target)).toContain('/data');
    });

    it('minio-init creates the bucket the apps use, on the minio service with its root credentials', () => {
      const init = service('minio-init');
      const env = envOf(service('minio'));
      const args = [...argv(init.entrypoint), ...argv(init.command)];
      expect(args).toEqual(['mc', 'mb', '--ignore-existing', `local/${envOf(service('gateway')).OBJECT_STORE_S3_BUCKET}`]);
      const host = new URL(envOf(init).MC_HOST_local);
      expect({ host: host.host, user: decodeURIComponent(host.username), password: decodeURIComponent(host.password) }).toEqual({
        host: 'minio:9000',
        user: env.MINIO_ROOT_USER,
        password: env.MINIO_ROOT_PASSWORD,
      });
      expect(dependsOn(init)).toEqual({ minio: 'service_healthy' });
    });

    it('the S3 settings it sets are the object-store config ones (a misspelt name would be silently ignored)', () => {
      const set = Object.keys(envOf(service('gateway'))).filter((k) => k.startsWith('OBJECT_STORE_S3_'));
      expect(S3_SETTINGS.length).toBeGreaterThan(0);
      expect(set.sort()).toEqual([...S3_SETTINGS].sort());
    });

    describe.each(Object.keys(APPS) as AppName[])('%s', (app) => {
      it('stores objects in the minio bucket, path-style, with the MinIO credentials, after minio-init', () => {
        const env = envOf(service(app));
        const minio = envOf(service('minio'));
        expect({
          bucket: env.OBJECT_STORE_S3_BUCKET,
          endpoint: env.OBJECT_STORE_S3_ENDPOINT,
          pathStyle: env.OBJECT_STORE_S3_FORCE_PATH_STYLE,
          accessKey: env.AWS_ACCESS_KEY_ID,
          secretKey: env.AWS_SECRET_ACCESS_KEY,
        }).toEqual({
          bucket: 'agentrun-snapshots',
          endpoint: 'http://minio:9000',
          pathStyle: 'true',
          accessKey: minio.MINIO_ROOT_USER,
          secretKey: minio.MINIO_ROOT_PASSWORD,
        });
        expect(dependsOn(service(app))).toMatchObject({ 'minio-init': 'service_completed_successfully' });
      });
    });
  });

  describe('apps', () => {
    const expectedPort: Record<AppName, number> = {
      gateway: Number(stack.GATEWAY_PORT),
      orchestrator: 8081,
      'gpu-worker': 8082,
      projector: 8083,
      snapshotter: 8084,
    };
    /** Each app's secrets of its own beside the database password: the setting naming the file, the secret, its file on the host. */
    const ownSecrets: Record<AppName, { setting: string; path: string; secret: string; file: string }[]> = {
      // The gateway signs its paging cursors.
      gateway: [{ setting: 'CURSOR_SECRET_FILE', path: '/run/secrets/cursor_secret', secret: 'cursor_secret', file: '.stack/compose/secrets/cursor-secret' }],
      // Production mode refuses every unsigned command on Kafka: the orchestrator has the secret keys derive from.
      orchestrator: [{ setting: 'AGENTRUN_COMMAND_KEY_SECRET_FILE', path: '/run/secrets/command_key_secret', secret: 'command_key_secret', file: '.stack/compose/secrets/command-key-secret' }],
      'gpu-worker': [],
      projector: [],
      snapshotter: [],
    };
    /** The apps that start runs, and so read the run defaults. */
    const startsRuns: AppName[] = ['gateway', 'orchestrator'];

    it('all five use the one image built from the root Dockerfile', () => {
      const images = new Set<string | undefined>();
      for (const app of Object.keys(APPS) as AppName[]) {
        const s = service(app);
        const build = typeof s.build === 'string' ? { context: s.build } : s.build;
        expect({ app, context: build?.context, dockerfile: build?.dockerfile ?? 'Dockerfile' }).toEqual({
          app,
          context: '.',
          dockerfile: 'Dockerfile',
        });
        images.add(s.image);
      }
      expect(images.size).toBe(1);
      expect(existsSync(join(REPO_ROOT, 'Dockerfile'))).toBe(true);
    });

    it('the Dockerfile runs node as a non-root user on node:20-bookworm-slim', () => {
      const dockerfile = readFileSync(join(REPO_ROOT, 'Dockerfile'), 'utf8');
      expect(dockerfile).toMatch(/^ARG NODE_IMAGE=node:20-bookworm-slim$/m);
      expect(dockerfile).toMatch(/^ENTRYPOINT \["node"\]$/m);
      expect(dockerfile).toMatch(/^USER node$/m);
      expect(dockerfile).toContain('npx tsc -b tsconfig.build.json');
      expect(dockerfile).toContain('npm ci --omit=dev');
    });

    it('gives the apps that start runs the run defaults from the one shared block, and they load', () => {
      const envs = startsRuns.map((app) => envOf(service(app)));
      const defaults = envs.map((env) => Object.fromEntries(Object.keys(runDefaultsSpec).map((k) => [k, env[k]])));
      expect(defaults).toEqual(defaults.map(() => defaults[0]));
      for (const env of envs) expect(() => loadConfig(runDefaultsSpec, env)).not.toThrow();
    });

    describe.each(Object.keys(APPS) as AppName[])('%s', (app) => {
      const { portVar, hostVar } = APPS[app];

      it(`runs apps/${app}/dist/main.js`, () => {
        expect(argv(service(app).command)).toEqual([`apps/${app}/dist/main.js`]);
        expect(existsSync(join(REPO_ROOT, 'apps', app, 'src', 'main.ts'))).toBe(true);
      });

      it('points at the compose Kafka, Temporal and Postgres, with the database password from the secret', () => {
        const env = envOf(service(app));
        const advertised = envOf(service('kafka')).KAFKA_ADVERTISED_LISTENERS.split(',').map((l) => l.split('://')[1]);
        expect(env.KAFKA_BROKERS).toBeTruthy();
        for (const broker of env.KAFKA_BROKERS.split(',')) {
          expect(advertised).toContain(broker);
          expect(broker.startsWith('127.0.0.1:')).toBe(false); // inside a container that is itself
        }
        expect(env.TEMPORAL_ADDRESS).toBe(`temporal:${stack.TEMPORAL_PORT}`);
        expect(env.TEMPORAL_NAMESPACE).toBe(stack.TEMPORAL_NAMESPACE);
        const db = new URL(env.DATABASE_URL);
        expect({
          protocol: db.protocol,
          host: db.hostname,
          port: db.port || '5432',
          user: decodeURIComponent(db.username),
          password: decodeURIComponent(db.password),
          database: db.pathname.replace(/^\//, ''),
        }).toEqual({
          protocol: 'postgres:',
          host: 'postgres',
          port: stack.POSTGRES_PORT,
          user: stack.POSTGRES_USER,
          password: '',
          database: stack.POSTGRES_DB,
        });
        expect(env.DATABASE_PASSWORD_FILE).toBe(envOf(service('postgres')).POSTGRES_PASSWORD_FILE);
        expect(service(app).secrets).toContain('database_password');
        // Inside a container an app listens on 0.0.0.0, which local mode refuses.
        expect(env.AGENTRUN_MODE).toBe('production');
        const own = ownSecrets[app];
        expect(own.map(({ setting }) => [setting, env[setting]])).toEqual(own.map(({ setting, path }) => [setting, path]));
        expect(service(app).secrets).toEqual(expect.arrayContaining(own.map(({ secret }) => secret)));
        expect(own.map(({ secret }) => compose.secrets?.[secret]?.file)).toEqual(own.map(({ file }) => file));
      });

      // Inside a container the app must listen on 0.0.0.0 for its published port to answer. Only the
      // gateway reads a host setting (GATEWAY_HOST) today; the others bind 127.0.0.1 until they read theirs.
      it(`sets ${portVar} to the port it publishes, ${hostVar} to 0.0.0.0, and checks /readyz there`, () => {
        const s = service(app);
        const env = envOf(s);
        const port = expectedPort[app];
        expect(env[portVar]).toBe(String(port));
        expect(portsOf(s).map((p) => [p.host, p.container])).toEqual([[port, port]]);
        expect(env[hostVar]).toBe('0.0.0.0');
        expect(argv(s.healthcheck?.test).join(' ')).toContain(`127.0.0.1:${port}/readyz`);
      });

      it('keeps WORKSPACE_ROOT and OBJECT_STORE_DIR on the shared named volume', () => {
        const s = service(app);
        const env = envOf(s);
        const mounts = namedMounts(s).filter((m) => m.source === 'agentrun-data');
        expect(mounts).toHaveLength(1);
        expect(Object.keys(compose.volumes ?? {})).toContain('agentrun-data');
        for (const key of ['WORKSPACE_ROOT', 'OBJECT_STORE_DIR']) {
          expect({ key, value: env[key] }).toEqual({ key, value: expect.stringMatching(new RegExp(`^${mounts[0].target}/`)) });
        }
      });

      it('sets the run defaults only if it starts runs (gateway, orchestrator)', () => {
        const set = Object.keys(envOf(service(app))).filter((k) => k in runDefaultsSpec);
        expect(set.sort()).toEqual(startsRuns.includes(app) ? Object.keys(runDefaultsSpec).sort() : []);
      });

      it('starts after the init jobs, the migration step and a healthy Postgres', () => {
        expect(dependsOn(service(app))).toMatchObject({
          'kafka-init': 'service_completed_successfully',
          'temporal-init': 'service_completed_successfully',
          migrate: 'service_completed_successfully',
          postgres: 'service_healthy',
        });
        const migrate = service('migrate');
        expect(argv(migrate.command)).toEqual(['tools/migrate.js']);
        expect(envOf(migrate).DATABASE_URL).toBe(envOf(service(app)).DATABASE_URL);
        expect(envOf(migrate).DATABASE_PASSWORD_FILE).toBe(envOf(service(app)).DATABASE_PASSWORD_FILE);
      });
    });
  });
});

// deploy/compose/local-images.yml: the same stack on images built here (deploy/compose/images.sh),
// for machines with Podman and no container registry (npm run test:compose).
describe('deploy/compose/local-images.yml builds the same servers as the native stack and the public images', () => {
  const compose = readCompose();
  const text = readFileSync(join(REPO_ROOT, 'deploy/compose/local-images.yml'), 'utf8');
  const override = parse(text.replace(/!override\s+/g, ''), { merge: true }) as Compose;
  const stackSh = readFileSync(join(REPO_ROOT, 'deploy/local/stack.sh'), 'utf8');
  const imagesSh = readFileSync(join(REPO_ROOT, 'deploy/compose/images.sh'), 'utf8');
  const stackDefault = (name: string): string => {
    const m = new RegExp(`^${name}="\\$\\{${name}:-([^}]+)\\}"`, 'm').exec(stackSh);
    if (!m) throw new Error(`deploy/local/stack.sh has no default for ${name}`);
    return m[1];
  };
  const tagOf = (image: string | undefined): string => (image ?? '').split(':').pop() ?? '';

  it.each([
    ['kafka', 'localhost/agentrun-kafka', 'KAFKA_VERSION'],
    ['kafka-init', 'localhost/agentrun-kafka', 'KAFKA_VERSION'],
    ['temporal-data-init', 'localhost/agentrun-temporal', 'TEMPORAL_CLI_VERSION'],
    ['temporal', 'localhost/agentrun-temporal', 'TEMPORAL_CLI_VERSION'],
    ['temporal-init', 'localhost/agentrun-temporal', 'TEMPORAL_CLI_VERSION'],
  ])('%s runs %s at the native version, the tag of its public image', (name, repo, versionVar) => {
    const image = override.services[name]?.image;
    expect(image).toBe(`${repo}:${stackDefault(versionVar)}`);
    expect(tagOf(compose.services[name].image)).toBe(stackDefault(versionVar));
    expect(imagesSh).toContain(`=${image}\n`);
  });

  it('postgres runs Debian bookworm\'s PostgreSQL 15, as the native stack installs, and the public image is 15 too', () => {
    expect(override.services.postgres.image).toBe('localhost/agentrun-postgres:15');
    expect(compose.services.postgres.image).toBe('postgres:15-bookworm');
    expect(readFileSync(join(REPO_ROOT, 'deploy/compose/images/postgres/Containerfile'), 'utf8')).toMatch(/postgresql-15\b/);
  });

  it('every app, migrate and the model server run the app image images.sh builds, never pulled', () => {
    for (const name of [...Object.keys(APPS), 'migrate', 'model-server']) {
      expect({ name, image: override.services[name]?.image, pull: override.services[name] && (override.services[name] as { pull_policy?: string }).pull_policy }).toEqual({
        name,
        image: 'localhost/agentrun:local',
        pull: 'never',
      });
    }
    expect(imagesSh).toContain('APP=localhost/agentrun:local\n');
  });

  it('leaves MinIO out and keeps snapshot archives in the directory store on the shared volume', () => {
    expect((override.services.minio as { profiles?: string[] }).profiles).toEqual(['minio']);
    expect((override.services['minio-init'] as { profiles?: string[] }).profiles).toEqual(['minio']);
    for (const app of Object.keys(APPS)) {
      expect(envOf(override.services[app]).OBJECT_STORE_S3_BUCKET).toBe('');
      expect(Object.keys(dependsOn(override.services[app])).sort()).toEqual(['kafka', 'kafka-init', 'migrate', 'postgres', 'temporal', 'temporal-init']);
      expect(envOf(compose.services[app]).OBJECT_STORE_DIR).toMatch(/^\/var\/lib\/agentrun\//);
    }
  });

  it('names only services docker-compose.yml has', () => {
    for (const name of Object.keys(override.services)) expect(Object.keys(compose.services)).toContain(name);
  });

  it('publishes every host port behind AGENTRUN_HOST_PORT_PREFIX, the Kafka address advertised to the host too', () => {
    const raw = readFileSync(join(REPO_ROOT, 'docker-compose.yml'), 'utf8');
    // The short-syntax entries of `ports:` lists (a healthcheck's in-container address is not one).
    const published = (raw.match(/^\s*- "127\.0\.0\.1:[^"]*"/gm) ?? []).map((line) => line.replace(/^\s*- /, ''));
    expect(published.length).toBeGreaterThan(10);
    for (const p of published) expect(p).toMatch(/^"127\.0\.0\.1:\$\{AGENTRUN_HOST_PORT_PREFIX:-\}\d+:\d+"$/);
    expect(raw).toContain('PLAINTEXT://127.0.0.1:${AGENTRUN_HOST_PORT_PREFIX:-}9092');
  });
});
