import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** Finds package.json above this file (src/ under tsx, dist/src/ once built). */
function readPackage(): { version: string } {
  for (const relative of ['../package.json', '../../package.json']) {
    const file = fileURLToPath(new URL(relative, import.meta.url));
    if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')) as { version: string };
  }
  return { version: '0.0.0' };
}

/** Depot's own version (package.json). */
export const DEPOT_VERSION = readPackage().version;

/** The GitLab release whose REST API v4 Depot follows; reported by GET /version. */
export const GITLAB_COMPATIBLE_VERSION = '17.6.0';
