// Orgs' monthly budgets in US dollars: every model call of an org's runs is reserved against it first,
// and a run whose call does not fit pauses (budget_exhausted) until the budget allows it.
//   npm run budget -- set --org ORG --monthly-usd N
//   npm run budget -- list [--org ORG]          this month's (UTC) spend and reservations beside each budget
//   npm run budget -- clear --org ORG
// Reads the services' database settings (DATABASE_URL, DATABASE_PASSWORD[_FILE], DATABASE_SSLMODE, ...),
// and runs pending migrations first. Needs the built libs (`npm run build`).
const { builtLibs, parseArgs, planned, UsageError } = require('./cli.js');

const USAGE = `usage:
  node tools/budget.js set --org ORG --monthly-usd N      set (or change) ORG's monthly budget, US dollars > 0
  node tools/budget.js list [--org ORG]                   budgets, with this month's spend and reservations
  node tools/budget.js clear --org ORG                    remove ORG's budget (its runs are limited by their own budgets only)
DATABASE_URL (default postgres://agentrun:agentrun@127.0.0.1:5432/agentrun), DATABASE_PASSWORD[_FILE] and
DATABASE_SSLMODE select the database, as for the services.`;

// The same as ORG_PATTERN and normaliseOrg in libs/contracts.
const ORG_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const normaliseOrg = (org) => org.replace(/[A-Z]+/g, (upper) => upper.toLowerCase());

function orgOf(flags, verb) {
  if (!flags.org) throw new UsageError(`${verb} needs --org ORG`);
  if (!ORG_RE.test(flags.org)) throw new UsageError(`--org must match ${ORG_RE.source}`);
  return normaliseOrg(flags.org);
}

function plan(argv) {
  const [command, ...rest] = argv;
  switch (command) {
    case 'set': {
      const { flags, positional } = parseArgs(rest, ['org', 'monthly-usd']);
      if (positional.length) throw new UsageError(`unexpected argument ${positional[0]}`);
      const org = orgOf(flags, 'set');
      const text = flags['monthly-usd'];
      if (text === undefined) throw new UsageError('set needs --monthly-usd N');
      const usd = Number(text);
      if (!/^\d+(\.\d+)?$/.test(text) || !Number.isFinite(usd) || usd <= 0 || usd >= 1e12) throw new UsageError(`--monthly-usd must be a number of dollars above 0, got '${text}'`);
      return { command, org, monthlyUsd: usd };
    }
    case 'list': {
      const { flags, positional } = parseArgs(rest, ['org']);
      if (positional.length) throw new UsageError(`unexpected argument ${positional[0]}`);
      return { command, org: flags.org === undefined ? undefined : orgOf(flags, 'list') };
    }
    case 'clear': {
      const { flags, positional } = parseArgs(rest, ['org']);
      if (positional.length) throw new UsageError(`unexpected argument ${positional[0]}`);
      return { command, org: orgOf(flags, 'clear') };
    }
    default:
      throw new UsageError(command ? `unknown command ${command}` : 'no command given');
  }
}

async function main() {
  const action = planned('budget', plan, USAGE);
  if (!action) return 2;
  const libs = builtLibs('budget');
  if (!libs) return 1;
  const { configLib, persistence } = libs;
  const { createDataSource, databaseOptionsFrom, migrate, BudgetLedger } = persistence;
  let config;
  try {
    config = configLib.loadConfig(configLib.databaseSpec);
  } catch (err) {
    if (!(err instanceof configLib.ConfigError)) throw err;
    process.stderr.write(`budget: ${err.message}\n`);
    return 1;
  }
  const dataSource = createDataSource({ ...databaseOptionsFrom(config, 'agentrun-budget-cli'), poolSize: 2 });
  await dataSource.initialize();
  try {
    await migrate(dataSource);
    const ledger = new BudgetLedger(dataSource);
    if (action.command === 'set') {
      await ledger.setOrgBudget(action.org, action.monthlyUsd);
      process.stdout.write(`org ${action.org}: monthly budget $${action.monthlyUsd}\n`);
    } else if (action.command === 'clear') {
      if (await ledger.clearOrgBudget(action.org)) process.stdout.write(`org ${action.org}: budget cleared\n`);
      else process.stdout.write(`org ${action.org} had no budget\n`);
    } else {
      const rows = await ledger.orgBudgets(action.org);
      if (!rows.length) process.stdout.write('no budgets\n');
      for (const b of rows) {
        const left = Math.max(0, b.monthly_usd - b.spent_usd - b.reserved_usd);
        process.stdout.write(`${b.org}\tmonthly $${b.monthly_usd}\tspent $${b.spent_usd}\treserved $${b.reserved_usd}\tleft $${Math.round(left * 1e8) / 1e8}\tset ${new Date(b.updated_at).toISOString()}\n`);
      }
    }
    return 0;
  } finally {
    await dataSource.destroy();
  }
}

if (require.main === module) {
  main().then(
    (code) => process.exit(code),
    (err) => {
      process.stderr.write(`budget: ${err && err.message ? err.message : String(err)}\n`);
      process.exit(1);
    },
  );
}

module.exports = { plan };
