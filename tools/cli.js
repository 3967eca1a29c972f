// What the operator CLIs (token.js, budget.js) share: `--name value` flags, usage errors, the built libs.
const path = require('node:path');

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

/** The command line planned, or undefined after printing the usage error (the tool exits 2). */
function planned(tool, plan, usage, argv = process.argv.slice(2)) {
  try {
    return plan(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`${tool}: ${err.message}\n${usage}\n`);
    return undefined;
  }
}

/** The built config and persistence libs, or undefined after saying to build them (the tool exits 1). */
function builtLibs(tool) {
  try {
    return { configLib: require(path.resolve(__dirname, '../libs/config/dist')), persistence: require(path.resolve(__dirname, '../libs/persistence/dist')) };
  } catch (err) {
    process.stderr.write(`${tool}: cannot load the built libs (run npm run build first): ${err.message}\n`);
    return undefined;
  }
}

module.exports = { builtLibs, parseArgs, planned, UsageError };
