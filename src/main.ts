import cluster from 'node:cluster';
import http from 'node:http';
import { createApp } from './app.js';
import { type Config, ConfigError, loadConfig } from './config.js';
import { EmbeddedPostgresError } from './db/embedded-postgres.js';
import { checkGitVersion } from './git/command.js';
import { scheduleCiJobs } from './jobs/ci.js';
import { scheduleDormantUsersJob } from './jobs/dormant-users.js';
import { scheduleEnvironmentJobs } from './jobs/environments.js';
import { scheduleHookJobs } from './jobs/hooks.js';
import { JOB_KINDS } from './jobs/kinds.js';
import { scheduleMemberJobs } from './jobs/members.js';
import { scheduleOauthJobs } from './jobs/oauth.js';
import { schedulePagesDomainsJob } from './jobs/pages-domains.js';
import { releaseDeadWorkers } from './jobs/queue.js';
import { Worker } from './jobs/worker.js';
import { LockedError } from './lib/lock-file.js';
import { createLogger, openRuntime, type Runtime } from './runtime.js';
import { ensureRootUser } from './services/bootstrap.js';
import { seedDemo } from './services/seed.js';

/** How the primary tells its server processes where the database is (WORKERS > 1). */
const DATABASE_ENV = 'DEPOT_WORKER_DATABASE';
/** A server process that dies is started again, unless they die faster than this. */
const RESPAWN_MIN_INTERVAL_MS = 1_000;

/**
 * Starts Depot: config, git check, database (the embedded server started and locked),
 * migrations, bootstrap; then serves in this process (WORKERS=1) or in WORKERS server processes
 * that share the port (node:cluster), the database, the storages and the job queue.
 */
async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config);
  if (cluster.isWorker) {
    const runtime = await openRuntime(config, { logger, attach: process.env[DATABASE_ENV] as string });
    await serve(config, runtime, false);
    return;
  }
  const gitVersion = await checkGitVersion();
  const runtime = await openRuntime(config, { logger });
  const bootstrap = await ensureRootUser(runtime.deps);
  if (bootstrap.created) {
    if (bootstrap.credentialsFile) {
      const lines = [
        '',
        'Depot created the root administrator.',
        ...(bootstrap.generatedPassword ? [`  password:              ${bootstrap.generatedPassword}`] : []),
        ...(bootstrap.generatedToken ? [`  personal access token: ${bootstrap.generatedToken}`] : []),
        `They are also in ${bootstrap.credentialsFile} (readable only by you). This is the only time they are printed.`,
        '',
      ];
      process.stdout.write(`${lines.join('\n')}\n`);
    }
    if (config.seedDemo) {
      const seeded = await seedDemo(runtime.deps);
      logger.info({ project: seeded.full_path }, 'seeded the demo project');
    }
  }
  // Daily jobs: the billable-member refresh (12:00 UTC) and the removal of expired memberships;
  // the deletion of expired OAuth codes and dead revoked tokens (03:20 UTC); the deactivation of
  // dormant users (00:21 UTC, when the setting asks for it); the pruning of the webhook and
  // integration delivery log (04:40 UTC).
  await scheduleMemberJobs(runtime.deps);
  await scheduleOauthJobs(runtime.deps);
  await scheduleDormantUsersJob(runtime.deps);
  await schedulePagesDomainsJob(runtime.deps);
  await scheduleHookJobs(runtime.deps);
  // Hourly: CI jobs stuck pending or past their timeout are failed.
  await scheduleCiJobs(runtime.deps);
  await scheduleEnvironmentJobs(runtime.deps);
  logger.info({ git: gitVersion, database: runtime.database.kind, workers: config.workers }, 'Depot is starting');
  if (config.workers === 1) await serve(config, runtime, runtime.owner);
  else await superviseWorkers(config, runtime);
}

/** Listens and runs jobs in this process until SIGTERM or SIGINT. */
async function serve(config: Config, runtime: Runtime, ownsQueue: boolean): Promise<void> {
  const { deps } = runtime;
  const app = createApp(deps);
  const server = http.createServer(app.callback());
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, resolve);
  });
  deps.logger.info({ url: config.baseUrl, pid: process.pid }, 'Depot is listening');
  // Background jobs (storage moves, ...): shared through the jobs table by every process.
  const worker = new Worker(deps, JOB_KINDS, { exclusive: ownsQueue });
  await worker.start();

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    deps.logger.info({ signal }, 'shutting down');
    server.close();
    server.closeIdleConnections();
    await worker.stop();
    await runtime.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
}

/**
 * The primary of WORKERS server processes: starts them, starts one again when it dies, and on
 * SIGTERM or SIGINT stops them all before the database.
 */
async function superviseWorkers(config: Config, runtime: Runtime): Promise<void> {
  const { logger } = runtime.deps;
  // Jobs left running by a process that died: requeued before any server process claims one.
  if (runtime.owner) await releaseDeadWorkers(runtime.deps.db, '', true);
  const env = { [DATABASE_ENV]: runtime.database.url };
  let stopping = false;
  let lastRespawn = 0;
  // Counted here: cluster.workers may still list a worker when its 'exit' event comes.
  let running = 0;
  const fork = () => {
    running += 1;
    cluster.fork(env);
  };
  const finish = async () => {
    await runtime.close();
    process.exit(0);
  };
  const stopAll = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    if (running === 0) return finish();
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGTERM');
  };
  for (let i = 0; i < config.workers; i++) fork();
  cluster.on('exit', (worker, code, signal) => {
    running -= 1;
    if (stopping) {
      if (running === 0) void finish();
      return;
    }
    logger.error({ pid: worker.process.pid, code, signal }, 'a server process died');
    if (Date.now() - lastRespawn < RESPAWN_MIN_INTERVAL_MS) {
      logger.fatal('server processes die as they start; stopping');
      void stopAll('respawn');
      return;
    }
    lastRespawn = Date.now();
    fork();
  });
  process.on('SIGINT', () => void stopAll('SIGINT'));
  process.on('SIGTERM', () => void stopAll('SIGTERM'));
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError || error instanceof LockedError || error instanceof EmbeddedPostgresError) {
    process.stderr.write(`depot: ${error.message}\n`);
  } else if (error instanceof Error && /git/.test(error.message) && !error.stack?.includes('node_modules')) {
    process.stderr.write(`depot: ${error.message}\n`);
  } else {
    process.stderr.write(
      `depot: failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
  }
  process.exit(1);
});
