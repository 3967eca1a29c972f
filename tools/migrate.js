// Applies the pending database migrations as their own step (before the services start, or as a
// Kubernetes Job), under the same advisory lock the services take in DATABASE_MIGRATE=auto.
//   npm run migrate
// Reads the services' database settings (DATABASE_URL, DATABASE_PASSWORD[_FILE], DATABASE_SSLMODE,
// DATABASE_SSL_*_FILE). Needs the built libs (`npm run build`). Exits non-zero with the reason.
const path = require('node:path');

function load(lib) {
  try {
    return require(path.resolve(__dirname, `../libs/${lib}/dist`));
  } catch (err) {
    process.stderr.write(`migrate: cannot load libs/${lib}/dist (run npm run build first): ${err.message}\n`);
    process.exit(1);
  }
}

async function main() {
  const { databaseSpec, loadConfig, ConfigError } = load('config');
  const persistence = load('persistence');
  let config;
  try {
    config = loadConfig(databaseSpec);
  } catch (err) {
    process.stderr.write(`migrate: ${err instanceof ConfigError ? err.message : err.stack}\n`);
    return 1;
  }
  // A migration may rewrite a large table: the services' statement timeout does not apply to it. Two
  // connections: one holds the advisory lock while the migrations run on the other.
  const options = { ...persistence.databaseOptionsFrom(config, 'agentrun-migrate'), poolSize: 2, statementTimeoutMs: 0 };
  const dataSource = persistence.createDataSource(options);
  const where = redacted(config.DATABASE_URL);
  try {
    await dataSource.initialize();
  } catch (err) {
    process.stderr.write(`migrate: cannot connect to ${where}: ${err.message}; check DATABASE_URL, DATABASE_PASSWORD and DATABASE_SSLMODE\n`);
    return 1;
  }
  try {
    const applied = await persistence.migrate(dataSource);
    const shipped = persistence.shippedMigrations();
    if (applied.length) process.stdout.write(`migrate: applied ${applied.join(', ')} to ${where}\n`);
    else process.stdout.write(`migrate: nothing to apply; ${where} is at ${shipped[shipped.length - 1]}\n`);
    return 0;
  } catch (err) {
    process.stderr.write(`migrate: failed on ${where}: ${err.message}\n`);
    return 1;
  } finally {
    await dataSource.destroy();
  }
}

/** The URL without its password, for messages. */
function redacted(url) {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return 'DATABASE_URL';
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`migrate: ${err.stack ?? err}\n`);
    process.exit(1);
  },
);
