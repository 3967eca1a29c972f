// API tokens for the gateway: create (shown once), list (never shows tokens), revoke.
//   npm run token -- create --org ORG [--subject WHO] [--label L]
//   npm run token -- list [--org ORG]
//   npm run token -- revoke ID
// Command keys, an org's credential for signing commands on Kafka (production mode), the same way:
//   npm run token -- command-key create --org ORG      (needs AGENTRUN_COMMAND_KEY_SECRET, as the orchestrator has it)
//   npm run token -- command-key list [--org ORG]
//   npm run token -- command-key revoke ID
// Reads the services' database settings (DATABASE_URL, DATABASE_PASSWORD[_FILE], DATABASE_SSLMODE,
// DATABASE_SSL_*_FILE), so it works inside a service's container as it is, and runs pending migrations first.
// Needs the built libs (`npm run build`).
const { builtLibs, parseArgs, planned, UsageError } = require('./cli.js');

const USAGE = `usage:
  node tools/token.js create --org ORG [--subject WHO] [--label LABEL]
                                                          create a token for ORG (shown once); --subject names who
                                                          it speaks for (an eval's reviewer approves with it; a
                                                          token without a subject cannot approve)
  node tools/token.js list [--org ORG]                    list tokens (never their values)
  node tools/token.js revoke ID                           revoke a token by its id (tok_...)
  node tools/token.js command-key create --org ORG        create a command key for ORG (shown once)
  node tools/token.js command-key list [--org ORG]        list command keys (id, org, fingerprint, created, revoked)
  node tools/token.js command-key revoke ID               revoke a command key by its id (ck_...)
DATABASE_URL (default postgres://agentrun:agentrun@127.0.0.1:5432/agentrun), DATABASE_PASSWORD[_FILE] and
DATABASE_SSLMODE select the database, as for the services. command-key create derives the key from
AGENTRUN_COMMAND_KEY_SECRET[_FILE], which must be the orchestrator's.`;

// The same as ORG_PATTERN in libs/contracts (an org the gateway would refuse would make a useless token).
const ORG_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** The same as normaliseOrg in libs/contracts: ASCII capitals lowered, nothing else. */
function normaliseOrg(org) {
  return org.replace(/[A-Z]+/g, (upper) => upper.toLowerCase());
}

// A subject is an eval reviewer's name (1-200 characters in the contracts); printable, without spaces or
// control characters, so it reads the same in `list`, in logs and in the reviewers it is matched against.
const SUBJECT_RE = /^[A-Za-z0-9][A-Za-z0-9._@+-]{0,199}$/;

/** `command-key ...`: the same three verbs as for tokens, on command keys. */
function planCommandKey(argv) {
  const [verb, ...rest] = argv;
  switch (verb) {
    case 'create': {
      const { flags, positional } = parseArgs(rest, ['org']);
      if (positional.length) throw new UsageError(`unexpected argument ${positional[0]}`);
      if (!flags.org) throw new UsageError('command-key create needs --org ORG');
      if (!ORG_RE.test(flags.org)) throw new UsageError(`--org must match ${ORG_RE.source}`);
      // The key is bound to the org commands name, which the orchestrator compares normalised.
      return { command: 'command-key create', org: normaliseOrg(flags.org) };
    }
    case 'list': {
      const { flags, positional } = parseArgs(rest, ['org']);
      if (positional.length) throw new UsageError(`unexpected argument ${positional[0]}`);
      return { command: 'command-key list', org: flags.org === undefined ? undefined : normaliseOrg(flags.org) };
    }
    case 'revoke': {
      const { positional } = parseArgs(rest, []);
      if (positional.length !== 1) throw new UsageError('command-key revoke needs exactly one key id');
      if (!/^ck_[0-9a-f]{16}$/.test(positional[0])) throw new UsageError('a command key id looks like ck_ followed by 16 hex digits');
      return { command: 'command-key revoke', id: positional[0] };
    }
    default:
      throw new UsageError(verb ? `unknown command-key command ${verb}` : 'command-key needs create, list or revoke');
  }
}

function plan(argv) {
  const [command, ...rest] = argv;
  switch (command) {
    case 'command-key':
      return planCommandKey(rest);
    case 'create': {
      const { flags, positional } = parseArgs(rest, ['org', 'label', 'subject']);
      if (positional.length) throw new UsageError(`unexpected argument ${positional[0]}`);
      if (!flags.org) throw new UsageError('create needs --org ORG');
      if (!ORG_RE.test(flags.org)) throw new UsageError(`--org must match ${ORG_RE.source}`);
      if (flags.subject !== undefined && !SUBJECT_RE.test(flags.subject)) throw new UsageError(`--subject must match ${SUBJECT_RE.source}`);
      // Orgs are case-insensitive: the token is made for (and printed with) the lowercase org the
      // gateway will act as, the same as normaliseOrg in libs/contracts. A subject is kept as given:
      // it is matched exactly against an eval's reviewers.
      return { command, org: normaliseOrg(flags.org), label: flags.label, subject: flags.subject };
    }
    case 'list': {
      const { flags, positional } = parseArgs(rest, ['org']);
      if (positional.length) throw new UsageError(`unexpected argument ${positional[0]}`);
      return { command, org: flags.org === undefined ? undefined : normaliseOrg(flags.org) };
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
  const action = planned('token', plan, USAGE);
  if (!action) return 2;
  const libs = builtLibs('token');
  if (!libs) return 1;
  const { configLib, persistence } = libs;
  const { createDataSource, databaseOptionsFrom, migrate, TokenStore, CommandKeyStore } = persistence;
  let config;
  try {
    config = configLib.loadConfig({ ...configLib.databaseSpec, ...configLib.commandKeySpec });
  } catch (err) {
    if (!(err instanceof configLib.ConfigError)) throw err;
    process.stderr.write(`token: ${err.message}\n`);
    return 1;
  }
  // Checked before the database is touched: a key made under another secret would never verify.
  const secret = config.AGENTRUN_COMMAND_KEY_SECRET;
  if (action.command === 'command-key create') {
    if (secret === undefined) {
      process.stderr.write('token: command-key create needs AGENTRUN_COMMAND_KEY_SECRET (or AGENTRUN_COMMAND_KEY_SECRET_FILE), the same as the orchestrator\'s\n');
      return 1;
    }
    if (secret.length < configLib.COMMAND_KEY_SECRET_MIN_LENGTH) {
      process.stderr.write(`token: AGENTRUN_COMMAND_KEY_SECRET is shorter than ${configLib.COMMAND_KEY_SECRET_MIN_LENGTH} characters\n`);
      return 1;
    }
  }
  // migrate() holds one connection for its advisory lock while the migrations run on another.
  const dataSource = createDataSource({ ...databaseOptionsFrom(config, 'agentrun-token-cli'), poolSize: 2 });
  await dataSource.initialize();
  try {
    await migrate(dataSource);
    if (action.command.startsWith('command-key ')) return await commandKeys(new CommandKeyStore(dataSource), action, secret);
    const store = new TokenStore(dataSource);
    if (action.command === 'create') {
      const { id, token } = await store.create(action.org, action.label, action.subject);
      // Scripts read these lines (`^token: `), so the earlier ones keep their exact shape.
      process.stdout.write(`id:    ${id}\norg:   ${action.org}\ntoken: ${token}\nsubject: ${action.subject ?? '(none: this token cannot approve)'}\n`);
      process.stderr.write('WARNING: this token is shown once and cannot be shown again; store it now.\n');
    } else if (action.command === 'list') {
      const tokens = await store.list(action.org);
      if (!tokens.length) process.stdout.write('no tokens\n');
      for (const t of tokens) {
        const state = t.revoked_at ? `revoked ${new Date(t.revoked_at).toISOString()}` : 'active';
        process.stdout.write(`${t.id}\t${t.org}\t${t.subject ? `subject ${t.subject}` : 'no subject'}\t${state}\tcreated ${new Date(t.created_at).toISOString()}\t${t.label ?? ''}\n`);
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

async function commandKeys(store, action, secret) {
  if (action.command === 'command-key create') {
    const { id, key, fingerprint } = await store.create(action.org, secret);
    process.stdout.write(`id:          ${id}\norg:         ${action.org}\nfingerprint: ${fingerprint}\nkey:         ${key}\n`);
    process.stderr.write('WARNING: this key is shown once and cannot be shown again; store it now. Sign each command with it (see the README).\n');
  } else if (action.command === 'command-key list') {
    const keys = await store.list(action.org);
    if (!keys.length) process.stdout.write('no command keys\n');
    for (const k of keys) {
      const state = k.revoked_at ? `revoked ${new Date(k.revoked_at).toISOString()}` : 'active';
      process.stdout.write(`${k.id}\t${k.org}\t${k.fingerprint}\tcreated ${new Date(k.created_at).toISOString()}\t${state}\n`);
    }
  } else {
    if (await store.revoke(action.id)) process.stdout.write(`revoked ${action.id}\n`);
    else if (await store.exists(action.id)) process.stdout.write(`${action.id} was already revoked\n`);
    else {
      process.stderr.write(`token: no command key ${action.id}\n`);
      return 1;
    }
  }
  return 0;
}

// Required by the unit tests for its argument parsing alone; run, it does the work.
if (require.main === module) {
  main().then(
    (code) => process.exit(code),
    (err) => {
      process.stderr.write(`token: ${err && err.message ? err.message : String(err)}\n`);
      process.exit(1);
    },
  );
}

module.exports = { plan, UsageError };
