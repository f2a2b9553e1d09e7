import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/**
 * A `git` first on PATH that records every `git archive` it starts (its pid, one line each, in
 * `log`) and holds it until the gate is open, then runs the real git in its place (same pid).
 * Every process started with this PATH, the server's spawner and other server processes
 * included, goes through it: the log counts generations across processes.
 */
export interface GatedGit {
  /** The directory to put first on PATH. */
  bin: string;
  /** The real git, which the gate does not see. */
  real: string;
  /** Pids of the `git archive` processes started so far. */
  archives(): number[];
  close(): void;
  open(): void;
}

export function gatedGit(dir: string): GatedGit {
  const bin = path.join(dir, 'bin');
  const log = path.join(dir, 'archives.log');
  const gate = path.join(dir, 'gate-open');
  const realGit = execFileSync('sh', ['-c', 'command -v git'], { encoding: 'utf8' }).trim();
  fs.mkdirSync(bin, { recursive: true });
  fs.writeFileSync(log, '');
  fs.writeFileSync(gate, '');
  fs.writeFileSync(
    path.join(bin, 'git'),
    [
      '#!/bin/sh',
      'for arg in "$@"; do',
      '  if [ "$arg" = archive ]; then',
      `    echo $$ >> '${log}'`,
      `    while [ ! -e '${gate}' ]; do sleep 0.02; done`,
      '    break',
      '  fi',
      'done',
      `exec '${realGit}' "$@"`,
      '',
    ].join('\n'),
    { mode: 0o755 },
  );
  return {
    bin,
    real: realGit,
    archives: () =>
      fs
        .readFileSync(log, 'utf8')
        .split('\n')
        .filter((line) => line !== '')
        .map(Number),
    close: () => fs.rmSync(gate, { force: true }),
    open: () => fs.writeFileSync(gate, ''),
  };
}
