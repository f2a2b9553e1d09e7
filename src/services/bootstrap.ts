import fs from 'node:fs';
import path from 'node:path';
import { findUserByUsername } from '../db/queries/users.js';
import { randomPassword } from '../lib/crypto.js';
import type { Deps } from './deps.js';
import { createPersonalAccessToken } from './tokens.js';
import { createUser } from './users.js';

export const ROOT_USERNAME = 'root';
export const ROOT_TOKEN_SCOPES = ['api', 'read_user', 'read_repository', 'write_repository', 'sudo', 'admin_mode'];
export const CREDENTIALS_FILE = 'initial_root_credentials';

export interface BootstrapResult {
  /** True on the first start, when the root administrator was created. */
  created: boolean;
  /** Generated secrets, to print once; undefined when they came from the environment. */
  generatedPassword?: string;
  generatedToken?: string;
  credentialsFile?: string;
}

/**
 * Creates the `root` administrator on first start, with ADMIN_PASSWORD/ADMIN_TOKEN or generated
 * ones written to STORAGE_DIR/initial_root_credentials (mode 0600).
 */
export async function ensureRootUser(deps: Deps): Promise<BootstrapResult> {
  if (await findUserByUsername(deps.db, ROOT_USERNAME)) return { created: false };
  const password = deps.config.adminPassword ?? randomPassword();
  const root = await createUser(
    deps,
    {
      username: ROOT_USERNAME,
      email: 'admin@example.com',
      name: 'Administrator',
      password,
      admin: true,
      skipConfirmation: true,
    },
    null,
  );
  const { plaintext } = await createPersonalAccessToken(deps, root, {
    name: 'initial root token',
    scopes: ROOT_TOKEN_SCOPES,
    expiresAt: null,
    allowNoExpiry: true,
    ...(deps.config.adminToken ? { plaintext: deps.config.adminToken } : {}),
  });
  const result: BootstrapResult = { created: true };
  if (!deps.config.adminPassword) result.generatedPassword = password;
  if (!deps.config.adminToken) result.generatedToken = plaintext;
  if (result.generatedPassword || result.generatedToken) {
    const file = path.join(deps.config.storageDir, CREDENTIALS_FILE);
    fs.mkdirSync(deps.config.storageDir, { recursive: true });
    const lines = [
      '# Depot: credentials of the root administrator, generated on first start.',
      '# Delete this file once you have stored them elsewhere.',
      'username: root',
      ...(result.generatedPassword ? [`password: ${result.generatedPassword}`] : []),
      ...(result.generatedToken ? [`personal_access_token: ${result.generatedToken}`] : []),
      '',
    ];
    fs.writeFileSync(file, lines.join('\n'), { mode: 0o600 });
    fs.chmodSync(file, 0o600);
    result.credentialsFile = file;
  }
  return result;
}
