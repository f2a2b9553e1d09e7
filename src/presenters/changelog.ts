/** GitLab's Entities::Changelog: the generated section under `notes`. */
export function presentChangelog(notes: string): { notes: string } {
  return { notes };
}
