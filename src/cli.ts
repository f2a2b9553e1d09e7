import fs from 'node:fs/promises';
import path from 'node:path';
import { Command } from 'commander';
import { ConfigError, loadConfig } from './config.js';
import { findUserByUsername } from './db/queries/users.js';
import type { StorageMove } from './db/schema.js';
import { ApiError } from './http/errors.js';
import { JOB_KINDS } from './jobs/kinds.js';
import { Worker } from './jobs/worker.js';
import { LockedError } from './lib/lock-file.js';
import { progressBar } from './lib/progress-bar.js';
import { createLogger, openRuntime, type Runtime } from './runtime.js';
import { refreshAllBillableMembers } from './services/billable-members.js';
import { type ImportResult, importAdvisories, parseAdvisoryText } from './services/dependencies/advisories.js';
import {
  type Directory,
  DirectoryError,
  type GroupSyncResult,
  parseDirectory,
  syncDirectory,
} from './services/ldap.js';
import { findProjectAndNamespace } from './services/projects.js';
import { createPersonalAccessToken, PAT_SCOPES } from './services/tokens.js';
import { createUser } from './services/users.js';
import { watchMoves } from './storage/move-watch.js';
import { MOVE_STATE_NAMES, scheduleBulkMoves, scheduleMove } from './storage/moves.js';
import { storageWeights } from './storage/placement.js';

/**
 * Runs `fn` with an open runtime, closing it afterwards: quiet logs on stderr (stdout is the
 * command's answer), on the running server's embedded database when one runs.
 */
async function withRuntime(fn: (runtime: Runtime) => Promise<void>): Promise<void> {
  const config = loadConfig({ LOG_LEVEL: 'warn', ...process.env });
  const runtime = await openRuntime(config, { logger: createLogger(config, 2), shareRunning: true });
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

const storage = program.command('storage').description('repository storages and storage moves');
storage
  .command('list')
  .description('list the storages with their weights for new projects and their project counts')
  .action(() =>
    withRuntime(async ({ deps }) => {
      const weights = await storageWeights(deps);
      const counts = await deps.db
        .selectFrom('projects')
        .select(['repository_storage', (eb) => eb.fn.countAll<number>().as('n')])
        .groupBy('repository_storage')
        .execute();
      for (const name of deps.storages.names()) {
        const n = Number(counts.find((c) => c.repository_storage === name)?.n ?? 0);
        process.stdout.write(`${name}\t${deps.storages.root(name)}\tweight ${weights[name]}\t${n} projects\n`);
      }
    }),
  );
storage
  .command('move')
  .description('move one project (--project) or every project on a storage (--from), showing progress')
  .option('--project <id-or-path>', 'the project to move')
  .option('--from <storage>', 'move every project on this storage')
  .option('--to <storage>', 'destination (default: picked by the storage weights)')
  .option('--no-wait', 'only schedule the moves; a running server carries them out')
  .action((opts: { project?: string; from?: string; to?: string; wait: boolean }) =>
    withRuntime(async ({ deps, owner }) => {
      if ((opts.project === undefined) === (opts.from === undefined)) {
        throw new CliError('give exactly one of --project and --from');
      }
      let moves: StorageMove[];
      if (opts.project !== undefined) {
        const found = await findProjectAndNamespace(deps, opts.project);
        if (!found) throw new CliError(`no project ${opts.project}`);
        moves = [await scheduleMove(deps, { type: 'project', project: found.project }, opts.to)];
      } else {
        const from = opts.from as string;
        if (!deps.storages.has(from)) throw new CliError(`unknown storage ${from}`);
        if (opts.to !== undefined && !deps.storages.has(opts.to)) throw new CliError(`unknown storage ${opts.to}`);
        moves = await scheduleBulkMoves(deps, 'project', from, opts.to);
      }
      process.stdout.write(`scheduled ${moves.length} move${moves.length === 1 ? '' : 's'}\n`);
      if (!opts.wait || moves.length === 0) return;
      const names = new Map(
        (
          await deps.db
            .selectFrom('projects')
            .select(['id', 'full_path'])
            .where(
              'id',
              'in',
              moves.map((m) => m.container_id),
            )
            .execute()
        ).map((p) => [p.id, p.full_path]),
      );
      // This process runs the moves itself (a server sharing a PostgreSQL database may take some).
      const worker = new Worker(deps, JOB_KINDS, { exclusive: owner });
      const interrupt = () => void worker.stop();
      process.once('SIGINT', interrupt);
      await worker.start();
      try {
        const outcome = await watchMoves(
          deps.db,
          moves.map((m) => m.id),
          process.stdout,
          (m) => `move ${m.id} ${names.get(m.container_id) ?? `project ${m.container_id}`}`,
        );
        if (outcome.failed.length > 0) throw new CliError(`${outcome.failed.length} move(s) did not finish`);
      } finally {
        process.off('SIGINT', interrupt);
        await worker.stop();
      }
    }),
  );
storage
  .command('moves')
  .description('list recent project repository storage moves with their state and progress')
  .option('--limit <n>', 'how many', '20')
  .action((opts: { limit: string }) =>
    withRuntime(async ({ deps }) => {
      const moves = await deps.db
        .selectFrom('repository_storage_moves')
        .selectAll()
        .orderBy('id', 'desc')
        .limit(Number(opts.limit) || 20)
        .execute();
      for (const m of moves) {
        process.stdout.write(
          `${m.id}\t${m.container_type} ${m.container_id}\t${m.source_storage_name} → ${m.destination_storage_name}\t` +
            `${MOVE_STATE_NAMES[m.state]}\t${progressBar(Number(m.bytes_copied), Number(m.bytes_total), 20)}` +
            `${m.error_message ? `\t${m.error_message}` : ''}\n`,
        );
      }
    }),
  );

const ldap = program.command('ldap').description('directory (LDAP) group synchronisation');
ldap
  .command('sync')
  .description(
    'read a directory export (YAML or JSON: groups with their members and levels) and synchronise those groups',
  )
  .argument('<file>', 'the directory export')
  .action((file: string) =>
    withRuntime(async ({ deps }) => {
      let directory: Directory;
      try {
        directory = parseDirectory(await fs.readFile(file, 'utf8'));
      } catch (error) {
        throw new CliError(`${file}: ${error instanceof Error ? error.message : String(error)}`);
      }
      let results: GroupSyncResult[];
      try {
        results = await syncDirectory(deps, directory);
      } catch (error) {
        if (error instanceof DirectoryError) throw new CliError(error.message);
        throw error;
      }
      for (const r of results) {
        const parts = [
          `${r.added.length} added`,
          `${r.updated.length} updated`,
          `${r.removed.length} removed`,
          `${r.overridden.length} overridden`,
        ];
        process.stdout.write(`${r.group}: ${parts.join(', ')}\n`);
        if (r.unknown.length > 0) process.stdout.write(`  no such users: ${r.unknown.join(', ')}\n`);
        if (r.keptLastOwner.length > 0) process.stdout.write(`  kept as last Owner: ${r.keptLastOwner.join(', ')}\n`);
      }
    }),
  );

const advisories = program.command('advisories').description('security advisories for the dependency list');
advisories
  .command('import')
  .description(
    'import OSV advisories: JSON files (one record, an array, or one record per line) or directories of them',
  )
  .argument('<paths...>', 'files or directories')
  .action((paths: string[]) =>
    withRuntime(async ({ deps }) => {
      const files: string[] = [];
      for (const given of paths) {
        const stat = await fs.stat(given).catch(() => null);
        if (!stat) throw new CliError(`${given}: no such file or directory`);
        if (!stat.isDirectory()) files.push(given);
        else {
          for (const name of (await fs.readdir(given)).sort()) {
            if (name.endsWith('.json')) files.push(path.join(given, name));
          }
        }
      }
      let records: unknown[] = [];
      for (const file of files) {
        try {
          records = records.concat(parseAdvisoryText(await fs.readFile(file, 'utf8')));
        } catch (error) {
          throw new CliError(`${file}: ${error instanceof Error ? error.message : String(error)}`);
        }
      }
      let result: ImportResult;
      try {
        result = await importAdvisories(deps.db, records);
      } catch (error) {
        if (error instanceof ApiError) throw new CliError(JSON.stringify(error.body.message));
        throw error;
      }
      process.stdout.write(`${result.imported} advisories imported, ${result.skipped} skipped\n`);
    }),
  );

const billable = program.command('billable-members').description('billable members of top-level groups');
billable
  .command('refresh')
  .description('refresh the billable member lists now (the server does it every day at 12:00 UTC)')
  .action(() =>
    withRuntime(async ({ deps }) => {
      const groups = await refreshAllBillableMembers(deps);
      process.stdout.write(`refreshed ${groups} group${groups === 1 ? '' : 's'}\n`);
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
