import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Command } from 'commander';
import { ProtocolClient } from './client.js';
import { executeJob } from './executor.js';

/**
 * `npm run runner -- register --url … --token …` and `npm run runner -- run`: Depot's own runner,
 * a shell executor that speaks only GitLab's public runner protocol.
 */

export interface RunnerConfig {
  url: string;
  token: string;
  id: number;
  buildsDir?: string;
}

/** How long an idle runner waits between job requests (the GitLab runner's check_interval default). */
export const CHECK_INTERVAL_MS = 3000;

export const defaultConfigPath = () => path.join(os.homedir(), '.depot-runner.json');

export async function readConfig(file: string): Promise<RunnerConfig> {
  return JSON.parse(await fs.readFile(file, 'utf8')) as RunnerConfig;
}

/** Registers with a registration token and writes the configuration (mode 0600: it holds the token). */
export async function register(options: {
  url: string;
  registrationToken: string;
  config: string;
  description?: string;
  tagList?: string[];
  runUntagged?: boolean;
  locked?: boolean;
}): Promise<RunnerConfig> {
  const client = new ProtocolClient(options.url);
  const { id, token } = await client.register(options.registrationToken, options);
  const config: RunnerConfig = { url: options.url, token, id };
  await fs.writeFile(options.config, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  return config;
}

/** Asks once for a job and runs it; the job's final state, or null when there was none. */
export async function runOnce(config: RunnerConfig, echo = false): Promise<'success' | 'failed' | 'canceled' | null> {
  const client = new ProtocolClient(config.url);
  const { job } = await client.requestJob(config.token, undefined);
  if (!job) return null;
  return executeJob(client, job, { echo, ...(config.buildsDir ? { buildsDir: config.buildsDir } : {}) });
}

/** Polls for jobs until stopped. */
export async function runForever(config: RunnerConfig, signal: AbortSignal): Promise<void> {
  const client = new ProtocolClient(config.url);
  let lastUpdate: string | undefined;
  while (!signal.aborted) {
    try {
      const response = await client.requestJob(config.token, lastUpdate);
      lastUpdate = response.lastUpdate;
      if (response.job) {
        process.stdout.write(`Checking for jobs... received job=${response.job.id}\n`);
        const state = await executeJob(client, response.job, {
          echo: true,
          ...(config.buildsDir ? { buildsDir: config.buildsDir } : {}),
        });
        process.stdout.write(`Job ${response.job.id} ${state}\n`);
        continue;
      }
    } catch (error) {
      process.stderr.write(`${(error as Error).message}\n`);
    }
    await new Promise((resolve) => setTimeout(resolve, CHECK_INTERVAL_MS));
  }
}

async function main(argv: string[]): Promise<void> {
  const program = new Command('depot-runner');
  program
    .command('register')
    .requiredOption('--url <url>', 'Depot (or GitLab) URL')
    .requiredOption('--token <token>', 'registration token')
    .option('--description <text>', 'runner description', 'depot-runner')
    .option('--tag-list <tags>', 'comma-separated tags', '')
    .option('--run-untagged <bool>', 'take untagged jobs', 'true')
    .option('--locked', 'lock to the project it registered with', false)
    .option('--config <file>', 'configuration file', defaultConfigPath())
    .action(async (opts) => {
      const config = await register({
        url: opts.url,
        registrationToken: opts.token,
        config: opts.config,
        description: opts.description,
        tagList: String(opts.tagList)
          .split(',')
          .map((t) => t.trim())
          .filter(Boolean),
        runUntagged: opts.runUntagged !== 'false',
        locked: Boolean(opts.locked),
      });
      process.stdout.write(`Runner ${config.id} registered; configuration in ${opts.config}\n`);
    });
  program
    .command('run')
    .option('--config <file>', 'configuration file', defaultConfigPath())
    .option('--once', 'run at most one job and exit', false)
    .action(async (opts) => {
      const config = await readConfig(opts.config);
      if (opts.once) {
        const state = await runOnce(config, true);
        process.stdout.write(state ? `Job ${state}\n` : 'No job\n');
        return;
      }
      const controller = new AbortController();
      process.once('SIGINT', () => controller.abort());
      process.once('SIGTERM', () => controller.abort());
      process.stdout.write(`depot-runner ${config.id} polling ${config.url}\n`);
      await runForever(config, controller.signal);
    });
  await program.parseAsync(argv);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv).catch((error: unknown) => {
    process.stderr.write(`${(error as Error).message}\n`);
    process.exit(1);
  });
}
