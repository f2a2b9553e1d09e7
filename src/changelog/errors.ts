/**
 * Why a changelog could not be generated (GitLab's Gitlab::Changelog::Error and the template
 * parser's errors). The API answers 422 `Failed to generate the changelog: <message>`.
 */
export class ChangelogError extends Error {}
