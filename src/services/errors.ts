import { validationError } from '../http/errors.js';

/** Collects model validation messages per field, as GitLab's `errors.messages` hash. */
export class Validation {
  private readonly errors: Record<string, string[]> = {};

  add(field: string, message: string): this {
    const list = this.errors[field] ?? [];
    list.push(message);
    this.errors[field] = list;
    return this;
  }

  get empty(): boolean {
    return Object.keys(this.errors).length === 0;
  }

  /** Throws GitLab's 400 `{"message": {...}}` if anything was added. */
  throwIfAny(): void {
    if (!this.empty) throw validationError(this.errors);
  }
}
