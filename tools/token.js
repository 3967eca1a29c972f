// API tokens for the gateway: create (shown once), list (never shows tokens), revoke.
//   npm run token -- create --org ORG [--label L]
//   npm run token -- list [--org ORG]
//   npm run token -- revoke ID
// Reads the services' database settings (DATABASE_URL, DATABASE_PASSWORD[_FILE], DATABASE_SSLMODE,
// DATABASE_SSL_*_FILE), so it works inside a service's container as it is, and runs pending migrations first.
// Needs the built libs (`npm run build`).
const path = require('node:path');

const USAGE = `usage:
  node tools/token.js create --org ORG [--label LABEL]   create a token for ORG (shown once)
  node tools/token.js list [--org ORG]                    list tokens (never their values)
  node tools/token.js revoke ID                           revoke a token by its id (tok_...)
DATABASE_URL (default postgres://agentrun:agentrun@127.0.0.1:5432/agentrun), DATABASE_PASSWORD[_FILE] and
DATABASE_SSLMODE select the database, as for the services.`;

// The same as ORG_PATTERN in libs/contracts (an org the gateway would refuse would make a useless token).
const ORG_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

class UsageError extends Error {}

/** Parses `--name value` flags, allowing only the names given; the rest are positional. */
function parseArgs(args, allowed) {
  const flags = {};
  const positional = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg.startsWith('--')) {
      const eq = arg.indexOf('=');
      const name = eq > 0 ? arg.slice(2, eq) : arg.slice(2);
      if (!allowed.includes(name)) throw new UsageError(`unknown option --${name}`);
      if (name in flags) throw new UsageError(`--${name} given twice`);
      const value = eq > 0 ? arg.slice(eq + 1) : args[++i];
      if (value === undefined || value === '' || (eq < 0 && value.startsWith('--'))) throw new UsageError(`--${name} needs a value`);
      flags[name] = value;
    } else {
      positional.push(arg);
    }
  }
  return { flags, positional };
}

function plan(argv) {
  const [command, ...rest] = argv;
  switch (command) {
    case 'create': {
      const { flags, positional } = parseArgs(rest, ['org', 'label']);
      if (positional.length) throw new UsageError(`unexpected argument ${positional[0]}`);
      if (!flags.org) throw new UsageError('create needs --org ORG');
      if (!ORG_RE.test(flags.org)) throw new UsageError(`--org must match ${ORG_RE.source}`);
      return { command, org: flags.org, label: flags.label };
    }
    case 'list': {
      const { flags, positional } = parseArgs(rest, ['org']);
      if (positional.length) throw new UsageError(`unexpected argument ${positional[0]}`);
      return { command, org: flags.org };
    }
    case 'revoke': {
      const { positional } = parseArgs(rest, []);
      if (positional.length !== 1) throw new UsageError('revoke needs exactly one token id');
      if (!/^tok_[0-9a-f]{16}$/.test(positional[0])) throw new UsageError('a token id looks like tok_ followed by 16 hex digits');
      return { command, id: positional[0] };
    }
    default:
      throw new UsageError(command ? `unknown command ${command}` : 'no command given');
  }
}

async function main() {
  let action;
  try {
    action = plan(process.argv.slice(2));
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`token: ${err.message}\n${USAGE}\n`);
    return 2;
  }
  let persistence;
  let configLib;
  try {
    configLib = require(path.resolve(__dirname, '../libs/config/dist'));
    persistence = require(path.resolve(__dirname, '../libs/persistence/dist'));
  } catch (err) {
    process.stderr.write(`token: cannot load the built libs (run npm run build first): ${err.message}\n`);
    return 1;
  }
  const { createDataSource, databaseOptionsFrom, migrate, TokenStore } = persistence;
  let config;
  try {
    config = configLib.loadConfig(configLib.databaseSpec);
  } catch (err) {
    if (!(err instanceof configLib.ConfigError)) throw err;
    process.stderr.write(`token: ${err.message}\n`);
    return 1;
  }
  // migrate() holds one connection for its advisory lock while the migrations run on another.
  const dataSource = createDataSource({ ...databaseOptionsFrom(config, 'agentrun-token-cli'), poolSize: 2 });
  await dataSource.initialize();
  try {
    await migrate(dataSource);
    const store = new TokenStore(dataSource);
    if (action.command === 'create') {
      const { id, token } = await store.create(action.org, action.label);
      process.stdout.write(`id:    ${id}\norg:   ${action.org}\ntoken: ${token}\n`);
      process.stderr.write('WARNING: this token is shown once and cannot be shown again; store it now.\n');
    } else if (action.command === 'list') {
      const tokens = await store.list(action.org);
      if (!tokens.length) process.stdout.write('no tokens\n');
      for (const t of tokens) {
        const state = t.revoked_at ? `revoked ${new Date(t.revoked_at).toISOString()}` : 'active';
        process.stdout.write(`${t.id}\t${t.org}\t${state}\tcreated ${new Date(t.created_at).toISOString()}\t${t.label ?? ''}\n`);
      }
    } else {
      if (await store.revoke(action.id)) process.stdout.write(`revoked ${action.id}\n`);
      else if (await store.exists(action.id)) process.stdout.write(`${action.id} was already revoked\n`);
      else {
        process.stderr.write(`token: no token ${action.id}\n`);
        return 1;
      }
    }
    return 0;
  } finally {
    await dataSource.destroy();
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`token: ${err && err.message ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
