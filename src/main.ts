import http from 'node:http';
import { createApp } from './app.js';
import { ConfigError, loadConfig } from './config.js';
import { checkGitVersion } from './git/command.js';
import { JOB_KINDS } from './jobs/kinds.js';
import { scheduleMemberJobs } from './jobs/members.js';
import { scheduleOauthJobs } from './jobs/oauth.js';
import { Worker } from './jobs/worker.js';
import { LockedError } from './lib/lock-file.js';
import { createLogger, openRuntime } from './runtime.js';
import { ensureRootUser } from './services/bootstrap.js';
import { seedDemo } from './services/seed.js';

/** Starts Depot: config, git check, lock, database, migrations, bootstrap, listen. */
async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config);
  const gitVersion = await checkGitVersion();
  const runtime = await openRuntime(config, { logger });
  const { deps, database } = runtime;
  const bootstrap = await ensureRootUser(deps);
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
      const seeded = await seedDemo(deps);
      logger.info({ project: seeded.full_path }, 'seeded the demo project');
    }
  }
  const app = createApp(deps);
  const server = http.createServer(app.callback());
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, resolve);
  });
  logger.info({ url: config.baseUrl, git: gitVersion, database: database.kind }, 'Depot is listening');
  // Background jobs (storage moves, ...); with embedded PGlite this process alone owns the queue.
  const worker = new Worker(deps, JOB_KINDS, { exclusive: database.kind === 'pglite' });
  await worker.start();
  // Daily jobs: the billable-member refresh (12:00 UTC) and the removal of expired memberships.
  await scheduleMemberJobs(deps);
  // Daily deletion of expired OAuth codes and dead revoked tokens (03:20 UTC).
  await scheduleOauthJobs(deps);

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    server.close();
    server.closeIdleConnections();
    await worker.stop();
    await runtime.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError || error instanceof LockedError) {
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
