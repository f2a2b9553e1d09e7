import fs from 'node:fs';
import { PassThrough, type Readable } from 'node:stream';
import { pipeline as streamPipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import { ZipArchive } from 'archiver';
import tar from 'tar-stream';
import { LFS_POINTER_MAX_BYTES, parseLfsPointer, STREAM_CONFIG } from './blob.js';
import { gitEnvironment, streamGit } from './command.js';
import { GitError } from './errors.js';
import { launch } from './launcher.js';
import { isValidRepoPath } from './validate.js';

export type ArchiveFormat = 'tar.gz' | 'tar.bz2' | 'tar' | 'zip';

/** URL suffixes GitLab (Workhorse) accepts, and the format each means. */
const SUFFIXES: Record<string, ArchiveFormat> = {
  'tar.gz': 'tar.gz',
  tgz: 'tar.gz',
  gz: 'tar.gz',
  'tar.bz2': 'tar.bz2',
  tbz: 'tar.bz2',
  tbz2: 'tar.bz2',
  tb2: 'tar.bz2',
  bz2: 'tar.bz2',
  tar: 'tar',
  zip: 'zip',
};

export function archiveFormat(suffix: string | undefined): ArchiveFormat | null {
  if (suffix === undefined || suffix === '') return 'tar.gz';
  return SUFFIXES[suffix] ?? null;
}

export const ARCHIVE_EXTENSIONS: Record<ArchiveFormat, string> = {
  'tar.gz': 'tar.gz',
  'tar.bz2': 'tar.bz2',
  tar: 'tar',
  zip: 'zip',
};

/** Where the content of an LFS pointer lives, if the object is stored; null otherwise. */
export type LfsResolver = (oid: string, size: number) => Promise<string | null>;

export interface ArchiveOptions {
  commitId: string;
  /** Top-level folder inside the archive (no trailing slash). */
  prefix: string;
  format: ArchiveFormat;
  /** Only this subfolder (kept at its path under the prefix). */
  path?: string;
  excludePaths?: string[];
  /** Replace LFS pointers by stored objects (GitLab's include_lfs_blobs). */
  lfs?: LfsResolver;
  timeoutMs?: number;
}

export interface ArchiveStream {
  stream: Readable;
  kill(): void;
}

const BZIP2 = 'bzip2 -c';

function pathspecs(options: ArchiveOptions): string[] {
  const specs: string[] = [];
  for (const p of [options.path, ...(options.excludePaths ?? [])]) {
    if (p !== undefined && !isValidRepoPath(p)) throw new GitError('invalid_argument', 'invalid path');
  }
  if (options.path) specs.push(`:(literal)${options.path}`);
  for (const p of options.excludePaths ?? []) specs.push(`:(exclude,literal)${p}`);
  if (specs.length > 0 && !options.path) specs.unshift('.');
  return specs;
}

/**
 * Streams an archive of a commit. Without LFS rewriting, `git archive` writes the final bytes
 * itself (gzip built in, bzip2 through its command hook). With LFS, git's tar is rewritten on
 * the fly: pointer files whose objects are stored are replaced by the objects.
 */
export function streamArchive(gitDir: string, options: ArchiveOptions): ArchiveStream {
  if (!/^[0-9a-f]{40,64}$/.test(options.commitId)) throw new GitError('invalid_argument', 'archive takes a commit id');
  const specs = pathspecs(options);
  const direct = !options.lfs;
  const gitFormat = direct ? options.format : 'tar';
  const git = streamGit({
    gitDir,
    // Large files stream through git instead of being inflated whole (see STREAM_CONFIG).
    config: { ...STREAM_CONFIG, ...(gitFormat === 'tar.bz2' ? { 'tar.tar.bz2.command': BZIP2 } : {}) },
    subcommand: 'archive',
    flags: [`--format=${gitFormat}`, `--prefix=${options.prefix}/`],
    args: [options.commitId],
    // `git archive` reads `--end-of-options` and then takes a following `--` as a pathspec; the
    // commit id is checked hex above, so `<commit> -- <paths>` is safe without it.
    endOfOptions: false,
    ...(specs.length > 0 ? { paths: specs } : {}),
    timeoutMs: options.timeoutMs,
  });
  const killers: (() => void)[] = [git.kill];
  const kill = () => {
    for (const k of killers) k();
  };
  const exits: Promise<void>[] = [git.done];
  let final: Readable = git.stdout;
  if (!direct) {
    const rewritten = rewriteLfs(git.stdout, options.lfs as LfsResolver, options.format === 'zip');
    final = rewritten;
    if (options.format === 'tar.gz') final = rewritten.pipe(createGzip());
    if (options.format === 'tar.bz2') {
      const bzip = launch(['bzip2', '-c'], gitEnvironment());
      killers.push(() => bzip.kill());
      exits.push(
        new Promise((resolve, reject) => {
          bzip.on('error', reject);
          bzip.on('close', (code: number | null) =>
            code === 0 ? resolve() : reject(new GitError('failed', `bzip2 ended with ${code}`)),
          );
        }),
      );
      bzip.stdin.on('error', () => {});
      rewritten.pipe(bzip.stdin);
      final = bzip.stdout;
    }
  }
  // The stream ends only once every process has exited 0: one killed half-way leaves its output
  // short but ended, which must not pass for a whole archive (a cache would keep it).
  const out = new PassThrough();
  if (final !== git.stdout) final.once('error', (error) => out.destroy(error));
  Promise.all([streamPipeline(final, out, { end: false }), ...exits]).then(
    () => out.end(),
    (error: unknown) => {
      kill();
      out.destroy(error instanceof Error ? error : new Error(String(error)));
    },
  );
  return { stream: out, kill };
}

async function readAll(stream: Readable, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    size += (chunk as Buffer).length;
    if (size <= limit) chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/**
 * Reads a tar stream entry by entry and writes a new tar (or zip) where stored LFS objects
 * take the place of their pointers. One entry is in flight at a time, so memory stays flat.
 */
function rewriteLfs(input: Readable, resolve: LfsResolver, zip: boolean): Readable {
  const extract = tar.extract();
  const zipArchive = zip ? new ZipArchive({ zlib: { level: 6 } }) : null;
  const pack = zip ? null : tar.pack();
  const output = (zipArchive ?? pack) as unknown as Readable;

  const addEntry = (header: tar.Header, body: Readable | Buffer | null, size: number): Promise<void> =>
    new Promise((resolveEntry, reject) => {
      if (zipArchive) {
        const date = header.mtime ?? new Date(0);
        if (header.type === 'directory')
          zipArchive.append(Buffer.alloc(0), { name: header.name, type: 'directory', date, mode: header.mode });
        else if (header.type === 'symlink') zipArchive.symlink(header.name, header.linkname ?? '', header.mode);
        else if (header.type === 'file')
          zipArchive.append(body ?? Buffer.alloc(0), { name: header.name, date, mode: header.mode });
        // archiver queues entries and applies back-pressure through its own stream.
        resolveEntry();
        return;
      }
      const target = pack as tar.Pack;
      if (body === null || body instanceof Buffer) {
        target.entry({ ...header, size }, body ?? Buffer.alloc(0), (e) => (e ? reject(e) : resolveEntry()));
        return;
      }
      const sink = target.entry({ ...header, size }, (e) => (e ? reject(e) : resolveEntry()));
      (body as Readable).pipe(sink);
    });

  extract.on('entry', (header, source, next) => {
    const stream = source as unknown as Readable;
    void (async () => {
      if (header.type === 'file' && (header.size ?? 0) <= LFS_POINTER_MAX_BYTES) {
        const content = await readAll(stream, LFS_POINTER_MAX_BYTES);
        const pointer = parseLfsPointer(content);
        const stored = pointer ? await resolve(pointer.oid, pointer.size) : null;
        if (stored) {
          const size = (await fs.promises.stat(stored)).size;
          await addEntry(header, fs.createReadStream(stored), size);
        } else {
          await addEntry(header, content, content.length);
        }
      } else if (header.type === 'file') {
        if (zipArchive) {
          // archiver reads the entry stream itself; wait until it is consumed.
          const done = new Promise<void>((r) => stream.on('end', () => r()));
          await addEntry(header, stream, header.size ?? 0);
          await done;
        } else {
          await addEntry(header, stream, header.size ?? 0);
        }
      } else {
        await readAll(stream, 64 * 1024);
        await addEntry(header, null, 0);
      }
      next();
    })().catch((error: unknown) => extract.destroy(error as Error));
  });
  extract.on('finish', () => {
    if (zipArchive) void zipArchive.finalize();
    else (pack as tar.Pack).finalize();
  });
  extract.on('error', (error) => output.destroy(error));
  input.pipe(extract);
  return output;
}
