import { Command } from 'commander';
import { ConfigError, loadConfig } from './config.js';
import { findUserByUsername } from './db/queries/users.js';
import { LockedError } from './lib/lock-file.js';
import { openRuntime, type Runtime } from './runtime.js';
import { createPersonalAccessToken, PAT_SCOPES } from './services/tokens.js';
import { createUser } from './services/users.js';

/** Runs `fn` with an open runtime (quiet logs), closing it afterwards. */
async function withRuntime(fn: (runtime: Runtime) => Promise<void>): Promise<void> {
  const config = loadConfig({ LOG_LEVEL: 'warn', ...process.env });
  const runtime = await openRuntime(config);
  try {
    await fn(runtime);
  } finally {
    await runtime.close();
  }
}

const program = new Command('depot').description('Depot administration');

program
  .command('migrate')
  .description('bring the database schema up to date')
  .action(() =>
    withRuntime(async () => {
      process.stdout.write('database schema is up to date\n');
    }),
  );

const user = program.command('user').description('manage users');
user
  .command('create')
  .description('create a user')
  .requiredOption('--username <username>')
  .requiredOption('--email <email>')
  .requiredOption('--name <name>')
  .option('--password <password>', 'at least 8 characters; a random one when omitted')
  .option('--admin', 'make the user an administrator', false)
  .action((opts: { username: string; email: string; name: string; password?: string; admin: boolean }) =>
    withRuntime(async ({ deps }) => {
      const created = await createUser(
        deps,
        {
          username: opts.username,
          email: opts.email,
          name: opts.name,
          password: opts.password,
          randomPassword: opts.password === undefined,
          admin: opts.admin,
          skipConfirmation: true,
        },
        null,
      );
      process.stdout.write(`created user ${created.username} (id ${created.id})\n`);
    }),
  );

const token = program.command('token').description('manage personal access tokens');
token
  .command('create')
  .description('create a personal access token and print it once')
  .requiredOption('--username <username>')
  .requiredOption('--name <name>')
  .option('--scopes <scopes>', `comma-separated: ${PAT_SCOPES.join(', ')}`, 'api')
  .option('--expires-at <date>', 'YYYY-MM-DD (default: one year)')
  .action((opts: { username: string; name: string; scopes: string; expiresAt?: string }) =>
    withRuntime(async ({ deps }) => {
      const owner = await findUserByUsername(deps.db, opts.username);
      if (!owner) throw new CliError(`no user named ${opts.username}`);
      const scopes = opts.scopes.split(',').map((s) => s.trim());
      const unknown = scopes.filter((s) => !(PAT_SCOPES as readonly string[]).includes(s));
      if (unknown.length > 0) throw new CliError(`unknown scopes: ${unknown.join(', ')}`);
      const { plaintext } = await createPersonalAccessToken(deps, owner, {
        name: opts.name,
        scopes,
        expiresAt: opts.expiresAt ?? null,
      });
      process.stdout.write(`${plaintext}\n`);
    }),
  );

class CliError extends Error {}

program.parseAsync(process.argv).catch((error: unknown) => {
  if (error instanceof CliError || error instanceof ConfigError || error instanceof LockedError) {
    process.stderr.write(`depot: ${error.message}\n`);
  } else if (error && typeof error === 'object' && 'body' in error) {
    process.stderr.write(`depot: ${JSON.stringify((error as { body: unknown }).body)}\n`);
  } else {
    process.stderr.write(`depot: ${error instanceof Error ? error.message : String(error)}\n`);
  }
  process.exit(1);
});
