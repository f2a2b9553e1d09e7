import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { type GitStream, streamGit } from './command.js';

/** The two services of Git's smart HTTP protocol. */
export type GitService = 'git-upload-pack' | 'git-receive-pack';

/** A pkt-line (`0032# service=git-upload-pack\n`). */
export function pktLine(text: string): string {
  return `${(Buffer.byteLength(text) + 4).toString(16).padStart(4, '0')}${text}`;
}

/** What `/info/refs?service=` answers before the refs: the service line and a flush packet. */
export function serviceHeader(service: GitService): string {
  return `${pktLine(`# service=${service}\n`)}0000`;
}

/** `Git-Protocol` header values git accepts (`version=2`, `key=value:key2=value2`). */
export function gitProtocol(header: string | undefined): string | undefined {
  if (!header || header.length > 256 || !/^[A-Za-z0-9=:._-]+$/.test(header)) return undefined;
  return header;
}

export interface ServiceOptions {
  protocol?: string | undefined;
  /** Extra environment for hooks (push policy, push log). */
  env?: Record<string, string>;
  /** `-c` settings (hooks path). */
  config?: Record<string, string>;
}

const subcommand = (service: GitService) => service.slice(4); // upload-pack | receive-pack

/** `git <service> --stateless-rpc --advertise-refs`: the refs advertisement, streamed. */
export function advertiseRefs(gitDir: string, service: GitService, options: ServiceOptions = {}): GitStream {
  return streamGit({
    config: options.config ?? {},
    subcommand: subcommand(service),
    flags: ['--stateless-rpc', '--advertise-refs'],
    args: [gitDir],
    env: { ...(options.protocol ? { GIT_PROTOCOL: options.protocol } : {}), ...options.env },
  });
}

/**
 * `git <service> --stateless-rpc` with the client's request as stdin, its answer streamed. A push
 * runs no `gc --auto` of its own (git would detach it, beyond the push's write lease): the
 * repository maintenance job packs instead (optimizeRepository).
 */
export function runService(
  gitDir: string,
  service: GitService,
  input: Readable,
  options: ServiceOptions = {},
): GitStream {
  return streamGit({
    config: { ...(service === 'git-receive-pack' ? { 'receive.autogc': 'false' } : {}), ...options.config },
    subcommand: subcommand(service),
    flags: ['--stateless-rpc'],
    args: [gitDir],
    stdin: input,
    env: { ...(options.protocol ? { GIT_PROTOCOL: options.protocol } : {}), ...options.env },
  });
}

/**
 * Our receive hooks. pre-receive enforces the project's protected branches from DEPOT_* variables
 * the server sets for the pusher: the file DEPOT_PROTECTED_FILE holds one line per protected name
 * or wildcard, `<may push 0|1><force push allowed 0|1><may merge 0|1> <name>` (pushRulesForHook
 * in src/services/protected-branches.ts; names hold only characters valid in refs, plus `*`), so
 * the shell's `case` matches as GitLab's RefMatcher does. git runs it with the pushed objects in quarantine, so
 * `merge-base --is-ancestor` sees them; a refused update stops the whole push, with GitLab's
 * messages in the order GitLab's branch checks give them. post-receive appends the updated refs to
 * DEPOT_PUSH_LOG, which the server reads to record push events.
 */
// Tags are not protected: GitLab's admin_tag (change or delete an existing tag) comes with
// push_code, which every pusher already has.
const PRE_RECEIVE = `#!/bin/sh
# Without the rules nothing is known to be allowed: refuse rather than let everything through.
if [ ! -r "$DEPOT_PROTECTED_FILE" ]; then
  echo "The repository is temporarily unavailable. Please try again later." >&2; exit 1
fi
status=0
while read -r old new ref; do
  case "$new" in *[!0]*) deleting=0 ;; *) deleting=1 ;; esac
  case "$old" in *[!0]*) creating=0 ;; *) creating=1 ;; esac
  case "$ref" in
    refs/heads/*) branch=\${ref#refs/heads/} ;;
    *) continue ;;
  esac
  if [ "$deleting" = 1 ] && [ "$branch" = "$DEPOT_DEFAULT_BRANCH" ]; then
    echo "The default branch of a project cannot be deleted." >&2; status=1; continue
  fi
  matched=0; push=0; force=0; merge=0
  while IFS= read -r rule; do
    [ -n "$rule" ] || continue
    name=\${rule#* }
    case "$branch" in
      $name)
        matched=1
        case "$rule" in 1*) push=1 ;; esac
        case "$rule" in ?1*) force=1 ;; esac
        case "$rule" in ??1*) merge=1 ;; esac ;;
    esac
  done < "$DEPOT_PROTECTED_FILE"
  [ "$matched" = 1 ] || continue
  if [ "$creating" = 0 ] && [ "$deleting" = 0 ] && [ "$force" = 0 ] && ! git merge-base --is-ancestor "$old" "$new" 2>/dev/null; then
    echo "You are not allowed to force push code to a protected branch on this project." >&2; status=1
  elif [ "$deleting" = 1 ]; then
    if [ "$DEPOT_CAN_DELETE_PROTECTED" != 1 ]; then
      echo "You are not allowed to delete protected branches from this project. Only a project maintainer or owner can delete a protected branch." >&2
    else
      echo "You can only delete protected branches using the web interface." >&2
    fi
    status=1
  elif [ "$push" != 1 ]; then
    if [ "$creating" = 1 ] && [ "$merge" = 1 ]; then
      echo "You can only create protected branches using the web interface and API." >&2
    elif [ "$creating" = 1 ]; then
      echo "You are not allowed to create protected branches on this project." >&2
    else
      echo "You are not allowed to push code to protected branches on this project." >&2
    fi
    status=1
  fi
done
exit $status
`;

const POST_RECEIVE = `#!/bin/sh
cat >> "$DEPOT_PUSH_LOG"
`;

let hooksDir: string | undefined;

/** A directory holding our hooks (written once per process, named by content). */
export function receiveHooksDir(): string {
  if (hooksDir) return hooksDir;
  const hash = createHash('sha256').update(PRE_RECEIVE).update(POST_RECEIVE).digest('hex').slice(0, 16);
  const dir = path.join(os.tmpdir(), `depot-hooks-${process.getuid?.() ?? 0}-${hash}`);
  fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
  for (const [name, text] of [
    ['pre-receive', PRE_RECEIVE],
    ['post-receive', POST_RECEIVE],
  ] as const) {
    const file = path.join(dir, name);
    const temp = `${file}.${process.pid}`;
    fs.writeFileSync(temp, text, { mode: 0o755 });
    fs.renameSync(temp, file);
  }
  hooksDir = dir;
  return dir;
}

/** One line of DEPOT_PUSH_LOG: a ref git updated. */
export interface RefUpdate {
  oldId: string;
  newId: string;
  ref: string;
}

export function parsePushLog(text: string): RefUpdate[] {
  const updates: RefUpdate[] = [];
  for (const line of text.split('\n')) {
    const [oldId, newId, ref] = line.split(' ');
    if (oldId && newId && ref) updates.push({ oldId, newId, ref });
  }
  return updates;
}
