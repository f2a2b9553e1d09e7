import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { User } from '../../src/db/schema.js';
import { register as registerShippedRunner, runOnce } from '../../src/runner/main.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { commitFiles, drainJobs, registrationToken } from '../support/ci.js';
import { makeAdmin, makeSampleProject, makeToken } from '../support/factories.js';

/**
 * The dependency list reads the CycloneDX report (`artifacts:reports:cyclonedx`) of the default
 * branch's latest successful pipeline, uploaded by the shipped runner, beside the lock files.
 */
let app: TestApp;
let owner: User;
let ownerToken: string;
let dir: string;

beforeAll(async () => {
  app = await startTestApp();
  owner = await makeAdmin(app);
  ownerToken = await makeToken(app, owner);
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-sbom-'));
});
afterAll(async () => {
  await app?.close();
  if (dir) await fs.rm(dir, { recursive: true, force: true });
});

const SBOM = {
  bomFormat: 'CycloneDX',
  specVersion: '1.4',
  metadata: {
    properties: [
      { name: 'gitlab:dependency_scanning:input_file:path', value: 'web/package-lock.json' },
      { name: 'gitlab:dependency_scanning:package_manager:name', value: 'npm' },
    ],
  },
  components: [
    { type: 'library', name: 'lodash', version: '4.17.20', purl: 'pkg:npm/lodash@4.17.20' },
    { type: 'library', group: '@babel', name: 'core', version: '7.24.0', purl: 'pkg:npm/%40babel/core@7.24.0' },
  ],
};

const CI = `
sbom:
  script:
    - cp sbom/source.json gl-sbom-npm.cdx.json
  artifacts:
    reports:
      cyclonedx: [gl-sbom-*.cdx.json]
`;

describe('dependencies from a CycloneDX report', () => {
  it('a successful pipeline’s SBOM joins the lock files in GET /projects/:id/dependencies', {
    timeout: 120_000,
  }, async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'sbom' });
    const config = await registerShippedRunner({
      url: app.baseUrl,
      registrationToken: await registrationToken(app, ownerToken, `/projects/${project.id}`),
      config: path.join(dir, 'runner.json'),
    });
    const list = async () =>
      (await app.request(`/projects/${project.id}/dependencies`, { token: ownerToken })).body as Record<
        string,
        unknown
      >[];
    expect(await list()).toEqual([]);

    await commitFiles(app, ownerToken, project, 'main', {
      '.gitlab-ci.yml': CI,
      'sbom/source.json': JSON.stringify(SBOM),
      'requirements.txt': 'flask==3.0.0\n',
    });
    await drainJobs(app);
    // Before the pipeline succeeds, only the lock file counts.
    expect((await list()).map((d) => d.name)).toEqual(['flask']);
    expect(await runOnce({ ...config, buildsDir: dir })).toBe('success');

    expect(await list()).toEqual([
      {
        name: '@babel/core',
        version: '7.24.0',
        package_manager: 'npm',
        dependency_file_path: 'web/package-lock.json',
        vulnerabilities: [],
      },
      {
        name: 'flask',
        version: '3.0.0',
        package_manager: 'pip',
        dependency_file_path: 'requirements.txt',
        vulnerabilities: [],
      },
      {
        name: 'lodash',
        version: '4.17.20',
        package_manager: 'npm',
        dependency_file_path: 'web/package-lock.json',
        vulnerabilities: [],
      },
    ]);
    const advisory = await app.request('/admin/security/advisories', {
      method: 'POST',
      token: ownerToken,
      body: {
        advisories: [
          {
            id: 'GHSA-35jh-r3h4-6jhm',
            summary: 'Command Injection in lodash',
            database_specific: { severity: 'HIGH' },
            affected: [
              {
                package: { ecosystem: 'npm', name: 'lodash' },
                ranges: [{ type: 'SEMVER', events: [{ introduced: '0' }, { fixed: '4.17.21' }] }],
              },
            ],
          },
        ],
      },
    });
    expect(advisory.status).toBe(201);
    const lodash = (await list()).find((d) => d.name === 'lodash');
    expect(lodash?.vulnerabilities).toEqual([{ name: 'Command Injection in lodash', severity: 'high' }]);
  });
});
