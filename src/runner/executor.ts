import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ZipArchive } from 'archiver';
import type { JobArtifact, JobResponse, ProtocolClient } from './client.js';

/**
 * The shell executor: clones with the job's credentials into a fresh directory, runs the steps in
 * bash with the job's variables, streams the log, uploads artifacts and reports the result.
 */

/** How often the log is sent while a job runs. */
export const TRACE_FLUSH_MS = 1000;
/** after_script gets at most this long (the GitLab runner's default). */
export const AFTER_SCRIPT_TIMEOUT_MS = 5 * 60 * 1000;

export interface ExecuteOptions {
  /** Where job directories are made (default: the system's temporary directory). */
  buildsDir?: string;
  /** Log lines to the console as well. */
  echo?: boolean;
}

const shellQuote = (value: string) => `'${value.replace(/'/g, `'\\''`)}'`;

/** The job's log: buffered, sent in chunks with Content-Range, resent from the server's length on 416. */
class TraceWriter {
  private buffer = Buffer.alloc(0);
  private sent = 0;
  private flushing: Promise<void> = Promise.resolve();
  canceled = false;

  constructor(
    private readonly client: ProtocolClient,
    private readonly job: JobResponse,
    private readonly echo: boolean,
  ) {}

  write(text: string | Buffer): void {
    const data = typeof text === 'string' ? Buffer.from(text) : text;
    if (this.echo) process.stdout.write(data);
    this.buffer = Buffer.concat([this.buffer, data]);
  }

  flush(): Promise<void> {
    this.flushing = this.flushing.then(() => this.send()).catch(() => undefined);
    return this.flushing;
  }

  private async send(): Promise<void> {
    if (this.sent >= this.buffer.length) {
      // Nothing new: a keep-alive, which is how a quiet job learns it was canceled.
      const res = await this.client.touchJob(this.job);
      if (res.status === 403 && res.jobStatus !== 'running') this.canceled = true;
      return;
    }
    for (let attempt = 0; attempt < 3 && this.sent < this.buffer.length; attempt++) {
      const chunk = this.buffer.subarray(this.sent);
      const res = await this.client.patchTrace(this.job, this.sent, chunk);
      if (res.status === 202) {
        this.sent += chunk.length;
      } else if (res.status === 416 && res.serverSize !== null && res.serverSize <= this.buffer.length) {
        this.sent = res.serverSize;
      } else if (res.status === 403) {
        if (res.jobStatus === 'canceled' || res.jobStatus === 'failed' || res.jobStatus === 'success')
          this.canceled = true;
        return;
      } else return;
    }
  }
}

interface RunResult {
  exitCode: number | null;
  timedOut: boolean;
  canceled: boolean;
}

/** Runs a bash script, its output into the log; killed (with its process group) on timeout or cancel. */
function runScript(
  script: string,
  cwd: string,
  env: NodeJS.ProcessEnv,
  trace: TraceWriter,
  timeoutMs: number,
): Promise<RunResult> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['--noprofile', '--norc', '-c', script], {
      cwd,
      env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let timedOut = false;
    let canceled = false;
    const kill = () => {
      try {
        if (child.pid) process.kill(-child.pid, 'SIGKILL');
      } catch {
        child.kill('SIGKILL');
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      kill();
    }, timeoutMs);
    const watch = setInterval(() => {
      if (trace.canceled) {
        canceled = true;
        kill();
      }
    }, 200);
    child.stdout.on('data', (d: Buffer) => trace.write(d));
    child.stderr.on('data', (d: Buffer) => trace.write(d));
    child.on('error', () => undefined);
    child.on('close', (code) => {
      clearTimeout(timer);
      clearInterval(watch);
      resolve({ exitCode: code, timedOut, canceled });
    });
  });
}

function commandScript(lines: string[], variables: Record<string, string>): string {
  const out = ['set -eo pipefail', 'set +o noclobber'];
  for (const [key, value] of Object.entries(variables)) {
    if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) out.push(`export ${key}=${shellQuote(value)}`);
  }
  for (const line of lines) {
    out.push(`printf '\\033[32;1m$ %s\\033[0;m\\n' ${shellQuote(line)}`);
    out.push(line);
  }
  return `${out.join('\n')}\n`;
}

async function zipPaths(dir: string, paths: string[], target: string): Promise<number> {
  const zip = new ZipArchive({ zlib: { level: 6 } });
  const output = createWriteStream(target);
  const done = new Promise<void>((resolve, reject) => {
    output.on('close', resolve);
    zip.on('error', reject);
  });
  zip.pipe(output);
  let entries = 0;
  for (const pattern of paths) {
    const stat = await fs.stat(path.join(dir, pattern)).catch(() => null);
    if (stat?.isDirectory()) {
      zip.directory(path.join(dir, pattern), pattern.replace(/\/+$/, ''));
      entries++;
    } else if (stat?.isFile()) {
      zip.file(path.join(dir, pattern), { name: pattern });
      entries++;
    } else {
      zip.glob(pattern, { cwd: dir });
      entries++;
    }
  }
  await zip.finalize();
  await done;
  return entries;
}

/** Runs one job to its end and reports it. Returns the final state. */
export async function executeJob(
  client: ProtocolClient,
  job: JobResponse,
  options: ExecuteOptions = {},
): Promise<'success' | 'failed' | 'canceled'> {
  const trace = new TraceWriter(client, job, options.echo ?? false);
  const flusher = setInterval(() => void trace.flush(), TRACE_FLUSH_MS);
  const root = await fs.mkdtemp(path.join(options.buildsDir ?? os.tmpdir(), `depot-runner-${job.id}-`));
  const dir = path.join(root, 'build');
  const variables = Object.fromEntries(job.variables.map((v) => [v.key, v.value]));
  variables.CI_BUILDS_DIR = root;
  variables.CI_PROJECT_DIR = dir;
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? root,
    LANG: 'C.UTF-8',
    GIT_TERMINAL_PROMPT: '0',
  };
  const deadline = Date.now() + job.runner_info.timeout * 1000;
  let state: 'success' | 'failed' | 'canceled' = 'failed';
  let exitCode: number | null = null;
  let failureReason: string | undefined = 'script_failure';
  try {
    trace.write(`Running with ${'depot-runner'} on ${os.hostname()}\nPreparing the "shell" executor\n`);
    trace.write(
      `Getting source from Git repository\nFetching changes with git depth set to ${job.git_info.depth}...\n`,
    );
    const clone = await runScript(
      [
        'set -e',
        `git init -q ${shellQuote(dir)}`,
        `cd ${shellQuote(dir)}`,
        `git remote add origin ${shellQuote(job.git_info.repo_url)}`,
        `git -c protocol.version=2 fetch -q --depth ${Math.max(1, job.git_info.depth)} origin ${job.git_info.refspecs.map(shellQuote).join(' ')} ${shellQuote(job.git_info.sha)}`,
        `git checkout -q -f ${shellQuote(job.git_info.sha)}`,
        `echo "Checking out ${job.git_info.sha.slice(0, 8)} as ${job.git_info.ref.replace(/[^\w./-]/g, '')}..."`,
      ].join('\n'),
      root,
      env,
      trace,
      Math.max(1000, deadline - Date.now()),
    );
    if (clone.exitCode !== 0) {
      failureReason = clone.timedOut ? 'job_execution_timeout' : 'runner_system_failure';
      state = clone.canceled ? 'canceled' : 'failed';
      trace.write('ERROR: Job failed: could not fetch the repository\n');
      return state;
    }
    for (const dependency of job.dependencies) {
      const file = path.join(root, `dependency-${dependency.id}.zip`);
      if (await client.downloadArtifacts(job, dependency.id, file)) {
        trace.write(`Downloading artifacts for ${dependency.name} (${dependency.id})...\n`);
        await runScript(`unzip -q -o ${shellQuote(file)} -d ${shellQuote(dir)}`, root, env, trace, 60_000);
      }
    }
    const main = job.steps.find((s) => s.name === 'script');
    let result: RunResult = { exitCode: 0, timedOut: false, canceled: false };
    if (main) {
      result = await runScript(
        commandScript(main.script, variables),
        dir,
        env,
        trace,
        Math.max(1000, deadline - Date.now()),
      );
    }
    const after = job.steps.find((s) => s.name === 'after_script');
    if (after && !result.canceled) {
      trace.write('Running after_script\n');
      await runScript(commandScript(after.script, variables), dir, env, trace, AFTER_SCRIPT_TIMEOUT_MS);
    }
    exitCode = result.exitCode;
    if (result.canceled) state = 'canceled';
    else if (result.timedOut) {
      state = 'failed';
      failureReason = 'job_execution_timeout';
      trace.write(`ERROR: Job failed: execution took longer than ${job.runner_info.timeout} seconds\n`);
    } else if (result.exitCode === 0) {
      state = 'success';
      failureReason = undefined;
    } else {
      trace.write(`ERROR: Job failed: exit code ${result.exitCode}\n`);
    }
    if (state !== 'canceled') {
      for (const artifact of job.artifacts) {
        const wanted =
          artifact.when === 'always' || (artifact.when === 'on_failure' ? state === 'failed' : state === 'success');
        if (!wanted || artifact.paths.length === 0) continue;
        if (artifact.artifact_type === 'archive') await uploadArchive(client, job, dir, root, artifact, trace);
        else await uploadReports(client, job, dir, artifact, trace);
      }
    }
    if (state === 'success') trace.write('Job succeeded\n');
    return state;
  } finally {
    clearInterval(flusher);
    await trace.flush();
    if (state !== 'canceled' && !trace.canceled) {
      await client
        .updateJob(job, state === 'success' ? 'success' : 'failed', exitCode, failureReason)
        .catch(() => undefined);
    }
    await fs.rm(root, { recursive: true, force: true }).catch(() => undefined);
  }
}

/** The files a report's paths name: plain paths, or a `*` pattern in the last segment. */
async function reportFiles(dir: string, patterns: string[]): Promise<string[]> {
  const files: string[] = [];
  for (const pattern of patterns) {
    const base = path.basename(pattern);
    const parent = path.dirname(pattern);
    if (!base.includes('*')) {
      if ((await fs.stat(path.join(dir, pattern)).catch(() => null))?.isFile()) files.push(pattern);
      continue;
    }
    const matcher = new RegExp(
      `^${base
        .split('*')
        .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
        .join('.*')}$`,
    );
    const names = await fs.readdir(path.join(dir, parent)).catch(() => [] as string[]);
    for (const name of names.sort()) if (matcher.test(name)) files.push(path.join(parent, name));
  }
  return files;
}

/** Uploads each file of a report (`reports:<type>`) as the GitLab runner uploads raw reports. */
async function uploadReports(
  client: ProtocolClient,
  job: JobResponse,
  dir: string,
  artifact: JobArtifact,
  trace: TraceWriter,
): Promise<void> {
  for (const file of await reportFiles(dir, artifact.paths)) {
    trace.write(`Uploading ${artifact.artifact_type} report ${file}...\n`);
    const status = await client.uploadArtifacts(job, path.join(dir, file), artifact, path.basename(file));
    if (status !== 201) trace.write(`WARNING: Uploading ${file} failed: ${status}\n`);
  }
}

async function uploadArchive(
  client: ProtocolClient,
  job: JobResponse,
  dir: string,
  root: string,
  artifact: JobArtifact,
  trace: TraceWriter,
): Promise<void> {
  trace.write('Uploading artifacts...\n');
  const file = path.join(root, 'artifacts.zip');
  await zipPaths(dir, artifact.paths, file);
  const status = await client.uploadArtifacts(job, file, artifact);
  trace.write(
    status === 201
      ? 'Uploading artifacts to coordinator... 201 Created\n'
      : `WARNING: Uploading artifacts failed: ${status}\n`,
  );
}
