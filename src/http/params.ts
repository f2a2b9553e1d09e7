import { z } from 'zod';
import { isValidDate } from '../lib/clock.js';
import { paramError } from './errors.js';

/**
 * Parameter types that coerce the way GitLab's Grape API does: numbers and booleans arrive as
 * strings in queries and forms; arrays arrive as `a=x,y` or `a[]=x&a[]=y`.
 */
const INTEGER = /^[+-]?\d+$/;
const TRUE_VALUES = new Set(['true', '1', 't', 'yes', 'y', 'on']);
const FALSE_VALUES = new Set(['false', '0', 'f', 'no', 'n', 'off']);

export const toInteger = (value: unknown) => {
  if (typeof value === 'string' && INTEGER.test(value.trim())) return Number(value.trim());
  return value;
};

const toBoolean = (value: unknown) => {
  if (typeof value === 'string') {
    const lower = value.trim().toLowerCase();
    if (TRUE_VALUES.has(lower)) return true;
    if (FALSE_VALUES.has(lower)) return false;
  }
  if (value === 1) return true;
  if (value === 0) return false;
  return value;
};

const toText = (value: unknown) => (typeof value === 'number' || typeof value === 'boolean' ? String(value) : value);

const toList = (value: unknown) => {
  if (typeof value === 'string') return value === '' ? [] : value.split(',').map((s) => s.trim());
  if (Array.isArray(value)) {
    return value.flatMap((v) => (typeof v === 'string' ? v.split(',').map((s) => s.trim()) : [v]));
  }
  if (typeof value === 'number') return [value];
  return value;
};

export const p = {
  /** An integer, from a JSON number or a decimal string. */
  int: () => z.preprocess(toInteger, z.number().int().safe()),
  /** A positive integer id. */
  id: () => z.preprocess(toInteger, z.number().int().min(1).max(2147483647)),
  bool: () => z.preprocess(toBoolean, z.boolean()),
  string: () => z.preprocess(toText, z.string()),
  /** A `YYYY-MM-DD` date. */
  date: () => z.preprocess(toText, z.string().refine(isValidDate)),
  /** An ISO 8601 timestamp, parsed to a Date. */
  datetime: () =>
    z.preprocess(
      toText,
      z
        .string()
        .refine((v) => /^\d{4}-\d{2}-\d{2}([T ][\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(v) && !Number.isNaN(Date.parse(v)))
        .transform((v) => new Date(v)),
    ),
  enum: <const T extends readonly [string, ...string[]]>(values: T) => z.preprocess(toText, z.enum(values)),
  /** A list from `a=x,y` or `a[]=x&a[]=y` (or a JSON array). */
  array: <T extends z.ZodType>(item: T) => z.preprocess(toList, z.array(item)),
  /** Coercers for array items. */
  intItem: () => z.preprocess(toInteger, z.number().int().safe()),
  /** `page`: 1 and up, default 1. */
  page: () => z.preprocess(toInteger, z.number().int().min(1).max(MAX_PAGE)).default(1),
  /** `per_page`: 1 and up, default 20, clamped to 100 as Kaminari's max_per_page does. */
  perPage: () =>
    z
      .preprocess(toInteger, z.number().int().min(1).max(2147483647))
      .transform((n) => Math.min(n, MAX_PER_PAGE))
      .default(DEFAULT_PER_PAGE),
};

export const DEFAULT_PER_PAGE = 20;
export const MAX_PER_PAGE = 100;
const MAX_PAGE = 1_000_000;

/** The two pagination parameters, to spread into a route's schema. */
export const pagination = () => ({ page: p.page(), per_page: p.perPage() });

/** A parameter bag: merged path, query and body values, validated by one zod object. */
export type Params = Record<string, unknown>;

/** Grape's `mutually_exclusive`: at most one of the names may be given. */
export function mutuallyExclusive(input: Params, names: string[], ctx: z.RefinementCtx): void {
  const given = names.filter((n) => input[n] !== undefined);
  if (given.length > 1)
    ctx.addIssue({ code: 'custom', message: `${given.join(', ')} are mutually exclusive`, path: [] });
}

/** Grape's `at_least_one_of`. */
export function atLeastOneOf(input: Params, names: string[], ctx: z.RefinementCtx): void {
  if (names.every((n) => input[n] === undefined)) {
    ctx.addIssue({
      code: 'custom',
      message: `${names.join(', ')} are missing, at least one parameter must be provided`,
      path: [],
    });
  }
}

/** Grape's `exactly_one_of`. */
export function exactlyOneOf(input: Params, names: string[], ctx: z.RefinementCtx): void {
  const given = names.filter((n) => input[n] !== undefined);
  if (given.length === 0) {
    ctx.addIssue({
      code: 'custom',
      message: `${names.join(', ')} are missing, exactly one parameter must be provided`,
      path: [],
    });
  } else if (given.length > 1) {
    ctx.addIssue({ code: 'custom', message: `${given.join(', ')} are mutually exclusive`, path: [] });
  }
}

const paramName = (path: PropertyKey[]) =>
  path.map((segment, i) => (i === 0 ? String(segment) : `[${String(segment)}]`)).join('');

const valueAt = (input: unknown, path: PropertyKey[]): unknown => {
  let current: unknown = input;
  for (const segment of path) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<PropertyKey, unknown>)[segment];
  }
  return current;
};

/** The schema a value meets inside optional, default, nullable and preprocess wrappers. */
function innerSchema(schema: z.ZodType): z.ZodType {
  let current = schema;
  for (;;) {
    if (current instanceof z.ZodOptional || current instanceof z.ZodNullable || current instanceof z.ZodDefault) {
      current = current.unwrap() as z.ZodType;
    } else if (current instanceof z.ZodPipe) {
      current = (current.in instanceof z.ZodTransform ? current.out : current.in) as z.ZodType;
    } else {
      return current;
    }
  }
}

const nullAccepted = new WeakMap<z.ZodType, boolean>();

/** True when a parameter gives `null` a meaning of its own (it is declared nullable). */
function acceptsNull(schema: z.ZodType): boolean {
  let accepted = nullAccepted.get(schema);
  if (accepted === undefined) {
    accepted = schema.safeParse(null).success;
    nullAccepted.set(schema, accepted);
  }
  return accepted;
}

/**
 * `null` for a parameter is the parameter left out, at any depth (`actions[].content`), as GitLab
 * reads it and as python-gitlab sends every unset optional attribute; only a parameter declared
 * nullable keeps it. Returns `value` itself when it holds no such null.
 */
export function withoutNulls(schema: z.ZodType | undefined, value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  const inner = schema && innerSchema(schema);
  if (Array.isArray(value)) {
    const element = inner instanceof z.ZodArray ? (inner.element as z.ZodType) : undefined;
    let changed = false;
    const items = value.map((item) => {
      const kept = withoutNulls(element, item);
      if (kept !== item) changed = true;
      return kept;
    });
    return changed ? items : value;
  }
  const shape = inner instanceof z.ZodObject ? (inner.shape as Record<string, z.ZodType>) : undefined;
  let result: Record<string, unknown> | undefined;
  for (const [key, item] of Object.entries(value)) {
    const field = shape?.[key];
    const kept = item === null && !(field && acceptsNull(field)) ? undefined : withoutNulls(field, item);
    if (kept === item) continue;
    result ??= { ...value };
    if (kept === undefined) delete result[key];
    else result[key] = kept;
  }
  return result ?? value;
}

/**
 * Validates merged parameters against a route's schema and returns the typed result, or throws
 * GitLab's 400 `{"error": "<param> is missing, <param> is invalid"}`.
 */
export function validateParams<S extends z.ZodType>(schema: S, given: Params): z.output<S> {
  const input = withoutNulls(schema, given) as Params;
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const messages: string[] = [];
  for (const issue of result.error.issues) {
    let message: string;
    if (issue.code === 'custom' && issue.path.length === 0) {
      message = issue.message;
    } else {
      let path = issue.path;
      // A list given as one string (`ids=1,x`) has no element to point at: name the list.
      for (let i = 1; i < path.length; i++) {
        const container = valueAt(input, path.slice(0, i));
        if (container !== undefined && (container === null || typeof container !== 'object')) {
          path = path.slice(0, i);
          break;
        }
      }
      const name = paramName(path);
      const raw = valueAt(input, path);
      if (path.length < issue.path.length) {
        message = `${name} is invalid`;
      } else if (issue.code === 'custom' && issue.message !== 'Invalid input') {
        message = `${name} ${issue.message}`;
      } else if (raw === undefined || raw === null) {
        message = `${name} is missing`;
      } else if (issue.code === 'invalid_value' || issue.code === 'too_small' || issue.code === 'too_big') {
        message = `${name} does not have a valid value`;
      } else {
        message = `${name} is invalid`;
      }
    }
    if (!messages.includes(message)) messages.push(message);
  }
  throw paramError(messages);
}
