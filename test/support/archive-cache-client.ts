/**
 * Another server process's view of the archive cache, for the cross-process tests: opens one
 * archive through the same cache code the archive route uses, on the same STORAGE_DIR, and writes
 * it to a file. Prints the origin (`hit`, `miss`, `joined`) once open, then `done`.
 *
 *   tsx test/support/archive-cache-client.ts <request JSON> <output file>
 *   request: {storageDir, projectId, gitDir, variant}
 */
import fs from 'node:fs';
import { pipeline } from 'node:stream/promises';
import pino from 'pino';
import { streamArchive } from '../../src/git/archive.js';
import { type ArchiveVariant, archiveCache } from '../../src/storage/archive-cache.js';

const [requestJson, output] = process.argv.slice(2) as [string, string];
const request = JSON.parse(requestJson) as {
  storageDir: string;
  projectId: number;
  gitDir: string;
  variant: ArchiveVariant;
};
const { variant } = request;
const cache = archiveCache({ storageDir: request.storageDir, archiveCacheMaxBytes: 1024 ** 3 });
const archive = await cache.open(
  request.projectId,
  variant,
  () =>
    streamArchive(request.gitDir, {
      commitId: variant.commitId,
      prefix: variant.prefix,
      format: variant.format,
      ...(variant.path ? { path: variant.path } : {}),
    }),
  pino({ level: 'silent' }),
);
process.stdout.write(`${archive.origin}\n`);
await pipeline(archive.read(), fs.createWriteStream(output));
process.stdout.write('done\n');
