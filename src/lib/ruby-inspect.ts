/**
 * Renders a validation-error hash the way Ruby's `Hash#inspect` does, for the few GitLab
 * messages that embed it (`Failed to save group {:path=>["has already been taken"]}`).
 */
export function rubyInspectErrors(errors: Record<string, string[]>): string {
  const entries = Object.entries(errors).map(
    ([key, messages]) => `:${key}=>[${messages.map((m) => JSON.stringify(m)).join(', ')}]`,
  );
  return `{${entries.join(', ')}}`;
}
