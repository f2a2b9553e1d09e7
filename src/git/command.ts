import { classifyGitFailure, GitError, InvalidArgumentError } from './errors.js';
import { launch } from './launcher.js';

/** Default limit for one git run; long-running streams pass their own. */
export const GIT_TIMEOUT_MS = 60_000;
const MAX_CAPTURE_BYTES = 64 * 1024 * 1024;

/**
 * The environment every git process gets: no system or global configuration, no prompts, no
 * pager, C locale. Only PATH is inherited.
 */
export function gitEnvironment(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    HOME: '/nonexistent',
    LC_ALL: 'C',
    LANG: 'C',
    TZ: 'UTC',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_ATTR_NOSYSTEM: '1',
    GIT_TERMINAL_PROMPT: '0',
    GIT_ASKPASS: '/bin/false',
    GIT_PAGER: 'cat',
    GIT_NO_REPLACE_OBJECTS: '1',
    GIT_OPTIONAL_LOCKS: '0',
    // Writing to a pipe, git log and rev-list flush stdout after every commit (one write and one
    // wake-up of the reader each): 2,000 commits took 37 ms instead of 15. Fully buffered output
    // changes no byte; cat-file --batch-command still answers each command at once.
    GIT_FLUSH: '0',
    ...extra,
  };
}

/**
 * One git invocation. `flags` are our own options (checked to look like options); `args` are
 * values that may come from users and are refused if they could be read as an option; `paths`
 * go after `--`.
 */
export interface GitCommand {
  /** The repository (`--git-dir`), or undefined for commands that need none. */
  gitDir?: string;
  /** `-c key=value` settings placed before the subcommand. */
  config?: Record<string, string>;
  subcommand: string;
  /** The word some subcommands take first (`commit-graph write`), before any option. */
  action?: string;
  /** Our own options; a pair is an option and its separate value (`['-p', sha]`). */
  flags?: readonly (string | readonly [string, string])[];
  args?: readonly string[];
  /** Insert `--end-of-options` before `args` (commands built on parse-options). */
  endOfOptions?: boolean;
  paths?: readonly string[];
  input?: string | Buffer;
  env?: Record<string, string>;
  timeoutMs?: number;
}

const FLAG = /^--?[A-Za-z0-9][A-Za-z0-9-]*(=[\s\S]*)?$/;
const SUBCOMMAND = /^[a-z][a-z-]*$/;

/** Builds argv for a git command, enforcing the separation of flags and user values. */
export function buildArgv(cmd: GitCommand): string[] {
  if (!SUBCOMMAND.test(cmd.subcommand)) throw new InvalidArgumentError('invalid git subcommand');
  const argv: string[] = [];
  if (cmd.gitDir !== undefined) argv.push(`--git-dir=${cmd.gitDir}`);
  for (const [key, value] of Object.entries(cmd.config ?? {})) argv.push('-c', `${key}=${value}`);
  argv.push(cmd.subcommand);
  if (cmd.action !== undefined) {
    if (!SUBCOMMAND.test(cmd.action)) throw new InvalidArgumentError('invalid git action');
    argv.push(cmd.action);
  }
  for (const item of cmd.flags ?? []) {
    const [flag, value] = typeof item === 'string' ? [item, undefined] : item;
    if (!FLAG.test(flag)) throw new InvalidArgumentError(`not a flag: ${flag}`);
    argv.push(flag);
    if (value !== undefined) {
      if (value.startsWith('-') || value.includes('\0'))
        throw new InvalidArgumentError('flag value looks like an option');
      argv.push(value);
    }
  }
  const args = cmd.args ?? [];
  for (const arg of args) {
    if (arg.startsWith('-') || arg.includes('\0')) throw new InvalidArgumentError('argument looks like an option');
  }
  if (cmd.endOfOptions && args.length > 0) argv.push('--end-of-options');
  argv.push(...args);
  if (cmd.paths !== undefined) {
    for (const p of cmd.paths) if (p.includes('\0')) throw new InvalidArgumentError('path contains NUL');
    argv.push('--', ...cmd.paths);
  }
  return argv;
}

export interface GitResult {
  stdout: Buffer;
  stderr: string;
}

/** Runs git to completion, capturing output. Rejects with a classified GitError on failure. */
export function runGit(cmd: GitCommand): Promise<GitResult> {
  const argv = buildArgv(cmd);
  return new Promise((resolve, reject) => {
    const child = launch(['git', ...argv], gitEnvironment(cmd.env), { input: cmd.input ?? '' });
    const out: Buffer[] = [];
    let outBytes = 0;
    let err = '';
    let tooLarge = false;
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill();
    }, cmd.timeoutMs ?? GIT_TIMEOUT_MS);
    child.stdout.on('data', (chunk: Buffer) => {
      outBytes += chunk.length;
      if (outBytes > MAX_CAPTURE_BYTES) {
        tooLarge = true;
        child.kill();
        return;
      }
      out.push(chunk);
    });
    child.stderr.on('data', (chunk: Buffer) => {
      if (err.length < 65536) err += chunk.toString('utf8');
    });
    child.on('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(
        error.code === 'ENOENT'
          ? new GitError('git_missing', 'git is not installed')
          : new GitError('failed', error.message),
      );
    });
    child.on('close', (code: number | null) => {
      clearTimeout(timer);
      if (tooLarge) return reject(new GitError('failed', 'git output too large'));
      if (timedOut) return reject(new GitError('timeout', 'git timed out', err));
      if (code !== 0) return reject(classifyGitFailure(argv.slice(argv.indexOf(cmd.subcommand)), code, err));
      resolve({ stdout: Buffer.concat(out), stderr: err });
    });
  });
}

/** Runs git and returns stdout as trimmed UTF-8 text. */
export async function gitText(cmd: GitCommand): Promise<string> {
  const { stdout } = await runGit(cmd);
  return stdout.toString('utf8').trim();
}

export const MIN_GIT_VERSION = [2, 39] as const;

/** Checks that a git ≥ 2.39 is on PATH; returns its version or throws a message saying what to do. */
export async function checkGitVersion(): Promise<string> {
  let text: string;
  try {
    text = await gitText({ subcommand: 'version' });
  } catch (error) {
    if (error instanceof GitError && error.code === 'git_missing') {
      throw new Error(
        'Depot needs the git command-line tool (version 2.39 or newer) on PATH. ' +
          'Install it, for example with "apt-get install git" on Debian or Ubuntu.',
      );
    }
    throw error;
  }
  const match = /git version (\d+)\.(\d+)(?:\.(\d+))?/.exec(text);
  if (!match) throw new Error(`Could not read the git version from "${text}"`);
  const major = Number(match[1]);
  const minor = Number(match[2]);
  if (major < MIN_GIT_VERSION[0] || (major === MIN_GIT_VERSION[0] && minor < MIN_GIT_VERSION[1])) {
    throw new Error(
      `Depot needs git ${MIN_GIT_VERSION.join('.')} or newer; found ${match[0].slice(12)}. Please upgrade git.`,
    );
  }
  return `${match[1]}.${match[2]}.${match[3] ?? '0'}`;
}

export interface GitStream {
  /** git's stdout, to pipe onwards with back-pressure. */
  stdout: import('node:stream').Readable;
  /** Resolves when git exits 0; rejects with a classified GitError otherwise. */
  done: Promise<void>;
  /** Stops git (client went away). */
  kill(): void;
}

/**
 * Starts git with its stdout as a stream, for output that must not be buffered (archives, raw
 * blobs, long logs). The caller must consume stdout; `done` tells how git ended. With `output`,
 * git writes to that socket itself and stdout is empty (see launch).
 */
export function streamGit(
  cmd: GitCommand & { stdin?: import('node:stream').Readable; output?: import('node:net').Socket },
): GitStream {
  const argv = buildArgv(cmd);
  const child = launch(['git', ...argv], gitEnvironment(cmd.env), {
    ...(cmd.stdin ? {} : { input: '' }),
    ...(cmd.output ? { output: cmd.output } : {}),
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    if (stderr.length < 65536) stderr += chunk.toString('utf8');
  });
  let timedOut = false;
  const timer = cmd.timeoutMs
    ? setTimeout(() => {
        timedOut = true;
        child.kill();
      }, cmd.timeoutMs)
    : undefined;
  child.stdin.on('error', () => {});
  cmd.stdin?.pipe(child.stdin);
  const done = new Promise<void>((resolve, reject) => {
    child.on('error', (error: NodeJS.ErrnoException) => {
      if (timer) clearTimeout(timer);
      reject(
        error.code === 'ENOENT'
          ? new GitError('git_missing', 'git is not installed')
          : new GitError('failed', error.message),
      );
    });
    child.on('close', (code: number | null) => {
      if (timer) clearTimeout(timer);
      if (timedOut) return reject(new GitError('timeout', 'git timed out', stderr));
      if (code !== 0) return reject(classifyGitFailure(argv.slice(argv.indexOf(cmd.subcommand)), code, stderr));
      resolve();
    });
  });
  // A consumer that stops early (client disconnect) kills git; nobody waits on `done` then.
  done.catch(() => {});
  return { stdout: child.stdout, done, kill: () => child.kill() };
}
