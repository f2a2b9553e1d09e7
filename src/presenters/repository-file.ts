import type { RepositoryFileDetails } from '../services/repository-files.js';

/** GitLab's `blob_data` (lib/api/files.rb), field for field and in its order. */
export function presentFileMetadata(file: RepositoryFileDetails) {
  return {
    file_name: file.name,
    file_path: file.path,
    size: file.size,
    encoding: 'base64',
    content_sha256: file.contentSha256,
    ref: file.ref,
    blob_id: file.blobId,
    commit_id: file.commitId,
    last_commit_id: file.lastCommitId,
    execute_filemode: file.executable,
  };
}

/** `GET …/files/:file_path`: the metadata plus the content, strict base64. */
export function presentFile(file: RepositoryFileDetails) {
  return { ...presentFileMetadata(file), content: (file.content ?? Buffer.alloc(0)).toString('base64') };
}

/**
 * GitLab's `set_http_headers(blob_data)`: `file_name` becomes `X-Gitlab-File-Name`, values are
 * `to_s` (nil → ""). Header values carry the UTF-8 bytes of the text as Rack sends them (Node
 * writes header strings as latin1, so the bytes are spelled out one character each).
 */
export function fileHeaders(file: RepositoryFileDetails): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [key, value] of Object.entries(presentFileMetadata(file))) {
    const name = `X-Gitlab-${key
      .split('_')
      .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
      .join('-')}`;
    headers[name] = Buffer.from(value === null ? '' : String(value), 'utf8').toString('latin1');
  }
  return headers;
}
