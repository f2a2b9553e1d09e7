import { spawnSync } from 'node:child_process';

/**
 * Programs some tests drive besides Node and git: the clients users have. A machine without one
 * skips those tests with one line saying what to install; CI (`CI=true`, where `.ci/run`
 * installs them all) fails instead, so CI never skips.
 */
export interface Program {
  /** How the skip line names it. */
  name: string;
  /** The Debian package that brings it. */
  debianPackage: string;
  /** A command that succeeds only when the program works. */
  probe: [string, ...string[]];
}

export const GIT_LFS: Program = { name: 'git-lfs', debianPackage: 'git-lfs', probe: ['git', 'lfs', 'version'] };
/** Debian's Chromium, driven through playwright-core (which never downloads a browser here). */
export const CHROMIUM_PATH = '/usr/bin/chromium';
export const CHROMIUM: Program = {
  name: `Chromium (${CHROMIUM_PATH})`,
  debianPackage: 'chromium',
  probe: [CHROMIUM_PATH, '--version'],
};
export const BZIP2: Program = { name: 'bzip2', debianPackage: 'bzip2', probe: ['bzip2', '--help'] };
/** Makes the throwaway certificate of the outbound https test. */
export const OPENSSL: Program = { name: 'openssl', debianPackage: 'openssl', probe: ['openssl', 'version'] };
export const UNZIP: Program = { name: 'unzip', debianPackage: 'unzip', probe: ['unzip', '-v'] };
export const PYTHON_GITLAB: Program = {
  name: 'python-gitlab for /usr/bin/python3',
  debianPackage: 'python3-gitlab',
  probe: ['/usr/bin/python3', '-c', 'import gitlab'],
};
/** python-gitlab's command line, `gitlab` upstream; Debian names it `python-gitlab`. */
export const GITLAB_CLI: Program = {
  name: "python-gitlab's command line (python-gitlab)",
  debianPackage: 'gitlab-cli',
  probe: ['python-gitlab', '--version'],
};

const found = new Map<Program, boolean>();

function present(program: Program): boolean {
  let ok = found.get(program);
  if (ok === undefined) {
    const [command, ...args] = program.probe;
    ok = spawnSync(command, args, { stdio: 'ignore', timeout: 30_000 }).status === 0;
    found.set(program, ok);
  }
  return ok;
}

/** The line that says what is missing and how to install it. */
export function missingMessage(programs: readonly Program[]): string | undefined {
  const missing = programs.filter((program) => !present(program));
  if (missing.length === 0) return undefined;
  const packages = [...new Set(missing.map((program) => program.debianPackage))].join(' ');
  return `${missing.map((program) => program.name).join(', ')} not found (apt-get install ${packages})`;
}

/**
 * True when this machine lacks one of `programs`, for `describe.skipIf(lacks(...))`: it prints
 * the one line naming them; under `CI=true` it throws that line instead, failing the file.
 */
export function lacks(...programs: Program[]): boolean {
  const message = missingMessage(programs);
  if (message === undefined) return false;
  if (/^(1|true)$/i.test(process.env.CI ?? '')) throw new Error(`CI=true: ${message}`);
  console.warn(`skipped: ${message}`);
  return true;
}
