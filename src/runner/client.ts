import fs from 'node:fs';

/**
 * The runner side of GitLab's runner protocol, as the GitLab runner's network/gitlab.go speaks
 * it: nothing here knows Depot's internals, so the same calls work against GitLab.
 */

export const RUNNER_NAME = 'depot-runner';
export const RUNNER_VERSION = '0.1.0';

export interface RunnerInfo {
  name: string;
  version: string;
  revision: string;
  platform: string;
  architecture: string;
  executor: string;
  shell: string;
  features: Record<string, boolean>;
}

export function runnerInfo(): RunnerInfo {
  return {
    name: RUNNER_NAME,
    version: RUNNER_VERSION,
    revision: 'depot',
    platform: process.platform,
    architecture: process.arch,
    executor: 'shell',
    shell: 'bash',
    features: {
      variables: true,
      artifacts: true,
      cancelable: true,
      upload_multiple_artifacts: true,
      upload_raw_artifacts: true,
      trace_reset: true,
      trace_checksum: false,
      trace_size: false,
      cancel_gracefully: true,
      return_exit_code: true,
    },
  };
}

export interface JobVariable {
  key: string;
  value: string;
  public?: boolean;
  masked?: boolean;
  file?: boolean;
}

export interface JobStep {
  name: string;
  script: string[];
  timeout: number;
  when: string;
  allow_failure: boolean;
}

export interface JobArtifact {
  name: string | null;
  untracked: boolean;
  paths: string[];
  when: string;
  expire_in: string | null;
  artifact_type: string;
  artifact_format: string;
}

export interface JobResponse {
  id: number;
  token: string;
  job_info: { id: number; name: string; stage: string; project_id: number; project_name: string };
  git_info: {
    repo_url: string;
    ref: string;
    sha: string;
    before_sha: string;
    ref_type: string;
    refspecs: string[];
    depth: number;
  };
  runner_info: { timeout: number };
  variables: JobVariable[];
  steps: JobStep[];
  artifacts: JobArtifact[];
  dependencies: { id: number; name: string; token: string; artifacts_file?: { filename: string; size: number } }[];
}

export class ProtocolClient {
  constructor(readonly url: string) {}

  private api(path: string): string {
    return `${this.url.replace(/\/+$/, '')}/api/v4${path}`;
  }

  /** POST /runners: registration token → { id, token }. */
  async register(
    registrationToken: string,
    options: { description?: string; tagList?: string[]; runUntagged?: boolean; locked?: boolean },
  ) {
    const res = await fetch(this.api('/runners'), {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({
        token: registrationToken,
        description: options.description ?? RUNNER_NAME,
        info: runnerInfo(),
        tag_list: (options.tagList ?? []).join(','),
        run_untagged: options.runUntagged ?? true,
        locked: options.locked ?? false,
      }),
    });
    if (res.status !== 201) throw new Error(`registration failed: ${res.status} ${await res.text()}`);
    return (await res.json()) as { id: number; token: string };
  }

  async verify(token: string): Promise<boolean> {
    const res = await fetch(this.api('/runners/verify'), {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ token }),
    });
    await res.arrayBuffer();
    return res.status === 200;
  }

  /** POST /jobs/request: a job, or null when there is none (204). */
  async requestJob(
    token: string,
    lastUpdate: string | undefined,
  ): Promise<{ job: JobResponse | null; lastUpdate: string | undefined }> {
    const res = await fetch(this.api('/jobs/request'), {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ token, info: runnerInfo(), ...(lastUpdate ? { last_update: lastUpdate } : {}) }),
    });
    const next = res.headers.get('X-GitLab-Last-Update') ?? lastUpdate;
    if (res.status === 204) {
      await res.arrayBuffer();
      return { job: null, lastUpdate: next };
    }
    if (res.status !== 201) throw new Error(`job request failed: ${res.status} ${await res.text()}`);
    return { job: (await res.json()) as JobResponse, lastUpdate: next };
  }

  /** PATCH /jobs/:id/trace from byte `offset`: the server's length, whether it refused, and the job's status. */
  async patchTrace(job: JobResponse, offset: number, data: Buffer) {
    const res = await fetch(this.api(`/jobs/${job.id}/trace`), {
      method: 'PATCH',
      headers: {
        'JOB-TOKEN': job.token,
        'Content-Type': 'text/plain',
        'Content-Range': `${offset}-${offset + data.length - 1}`,
      },
      body: data,
    });
    await res.arrayBuffer();
    const range = /^0-(\d+)$/.exec(res.headers.get('Range') ?? '');
    return {
      status: res.status,
      jobStatus: res.headers.get('Job-Status'),
      serverSize: range ? Number(range[1]) : null,
    };
  }

  /** PUT /jobs/:id with state running: a keep-alive that also tells whether the job was canceled. */
  async touchJob(job: JobResponse) {
    const res = await fetch(this.api(`/jobs/${job.id}`), {
      method: 'PUT',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ token: job.token, state: 'running' }),
    });
    await res.arrayBuffer();
    return { status: res.status, jobStatus: res.headers.get('Job-Status') };
  }

  /** PUT /jobs/:id with the final state. */
  async updateJob(job: JobResponse, state: 'success' | 'failed', exitCode: number | null, failureReason?: string) {
    const res = await fetch(this.api(`/jobs/${job.id}`), {
      method: 'PUT',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({
        token: job.token,
        state,
        ...(exitCode !== null ? { exit_code: exitCode } : {}),
        ...(failureReason ? { failure_reason: failureReason } : {}),
      }),
    });
    await res.arrayBuffer();
    return { status: res.status, jobStatus: res.headers.get('Job-Status') };
  }

  /** POST /jobs/:id/artifacts as multipart, as the GitLab runner uploads a zip archive. */
  async uploadArtifacts(
    job: JobResponse,
    file: string,
    artifact: JobArtifact,
    filename = 'artifacts.zip',
  ): Promise<number> {
    const form = new FormData();
    form.set('token', job.token);
    form.set('artifact_type', artifact.artifact_type);
    form.set('artifact_format', artifact.artifact_format);
    if (artifact.expire_in) form.set('expire_in', artifact.expire_in);
    form.set('file', await fs.openAsBlob(file), filename);
    const res = await fetch(this.api(`/jobs/${job.id}/artifacts`), {
      method: 'POST',
      headers: { 'JOB-TOKEN': job.token },
      body: form,
    });
    await res.arrayBuffer();
    return res.status;
  }

  /** GET /jobs/:id/artifacts of a dependency, into `target`. */
  async downloadArtifacts(job: JobResponse, dependencyId: number, target: string): Promise<boolean> {
    const res = await fetch(this.api(`/jobs/${dependencyId}/artifacts`), { headers: { 'JOB-TOKEN': job.token } });
    if (res.status !== 200) {
      await res.arrayBuffer();
      return false;
    }
    await fs.promises.writeFile(target, Buffer.from(await res.arrayBuffer()));
    return true;
  }
}
