import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ApiError } from '../../src/http/errors.js';
import {
  atLeastOneOf,
  exactlyOneOf,
  mutuallyExclusive,
  p,
  pagination,
  validateParams,
  withoutNulls,
} from '../../src/http/params.js';

const errorOf = (fn: () => unknown) => {
  try {
    fn();
  } catch (error) {
    if (error instanceof ApiError) return { status: error.status, body: error.body };
    throw error;
  }
  throw new Error('expected a parameter error');
};

describe('parameter coercion', () => {
  const schema = z.object({
    n: p.int().optional(),
    b: p.bool().optional(),
    list: p.array(p.string()).optional(),
    ids: p.array(p.intItem()).optional(),
    d: p.date().optional(),
    e: p.enum(['x', 'y']).optional(),
  });

  it('coerces decimal strings to integers and refuses anything else', () => {
    expect(validateParams(schema, { n: '42' }).n).toBe(42);
    expect(validateParams(schema, { n: 7 }).n).toBe(7);
    expect(errorOf(() => validateParams(schema, { n: '4.2' }))).toEqual({
      status: 400,
      body: { error: 'n is invalid' },
    });
    expect(errorOf(() => validateParams(schema, { n: '12abc' }))).toEqual({
      status: 400,
      body: { error: 'n is invalid' },
    });
  });

  it('accepts Grape booleans', () => {
    for (const v of ['true', '1', 't', 'yes', 'TRUE', true]) expect(validateParams(schema, { b: v }).b).toBe(true);
    for (const v of ['false', '0', 'f', 'no', false]) expect(validateParams(schema, { b: v }).b).toBe(false);
    expect(errorOf(() => validateParams(schema, { b: 'maybe' })).body).toEqual({ error: 'b is invalid' });
  });

  it('reads arrays from commas, brackets and JSON arrays', () => {
    expect(validateParams(schema, { list: 'a,b' }).list).toEqual(['a', 'b']);
    expect(validateParams(schema, { list: ['a', 'b,c'] }).list).toEqual(['a', 'b', 'c']);
    expect(validateParams(schema, { ids: '1,2,3' }).ids).toEqual([1, 2, 3]);
    expect(errorOf(() => validateParams(schema, { ids: '1,x' })).body).toEqual({ error: 'ids is invalid' });
    expect(errorOf(() => validateParams(schema, { ids: ['1', 'x'] })).body).toEqual({ error: 'ids[1] is invalid' });
  });

  it('checks dates strictly', () => {
    expect(validateParams(schema, { d: '2026-02-28' }).d).toBe('2026-02-28');
    expect(errorOf(() => validateParams(schema, { d: '2026-02-30' })).body).toEqual({ error: 'd is invalid' });
  });

  it('reports enum misses as GitLab does', () => {
    expect(errorOf(() => validateParams(schema, { e: 'z' })).body).toEqual({ error: 'e does not have a valid value' });
  });

  it('joins several problems with a comma, missing ones first-declared first', () => {
    const required = z.object({ ref: p.string(), from: p.string(), n: p.int().optional() });
    expect(errorOf(() => validateParams(required, { n: 'x' })).body).toEqual({
      error: 'ref is missing, from is missing, n is invalid',
    });
  });

  it('drops undeclared parameters', () => {
    expect(validateParams(z.object({ a: p.string() }), { a: 'x', admin: 'true' })).toEqual({ a: 'x' });
  });
});

describe('parameter relations', () => {
  const exclusive = z
    .object({ a: p.string().optional(), b: p.string().optional() })
    .superRefine((v, ctx) => mutuallyExclusive(v, ['a', 'b'], ctx));
  const oneOf = z
    .object({ a: p.string().optional(), b: p.string().optional() })
    .superRefine((v, ctx) => atLeastOneOf(v, ['a', 'b'], ctx));
  const exactly = z
    .object({ a: p.string().optional(), b: p.string().optional() })
    .superRefine((v, ctx) => exactlyOneOf(v, ['a', 'b'], ctx));

  it('mutually_exclusive', () => {
    expect(validateParams(exclusive, { a: '1' })).toEqual({ a: '1' });
    expect(errorOf(() => validateParams(exclusive, { a: '1', b: '2' })).body).toEqual({
      error: 'a, b are mutually exclusive',
    });
  });

  it('at_least_one_of', () => {
    expect(errorOf(() => validateParams(oneOf, {})).body).toEqual({
      error: 'a, b are missing, at least one parameter must be provided',
    });
  });

  it('exactly_one_of', () => {
    expect(errorOf(() => validateParams(exactly, {})).body).toEqual({
      error: 'a, b are missing, exactly one parameter must be provided',
    });
    expect(errorOf(() => validateParams(exactly, { a: '1', b: '1' })).body).toEqual({
      error: 'a, b are mutually exclusive',
    });
  });
});

describe('pagination parameters', () => {
  const schema = z.object(pagination());
  it('defaults to page 1 of 20', () => {
    expect(validateParams(schema, {})).toEqual({ page: 1, per_page: 20 });
  });
  it('clamps per_page to 100', () => {
    expect(validateParams(schema, { per_page: '500' }).per_page).toBe(100);
  });
  it('refuses zero and negative values', () => {
    expect(errorOf(() => validateParams(schema, { page: '0' })).body).toEqual({
      error: 'page does not have a valid value',
    });
    expect(errorOf(() => validateParams(schema, { per_page: '-1' })).body).toEqual({
      error: 'per_page does not have a valid value',
    });
  });
});

describe('null parameters', () => {
  const schema = z
    .object({
      name: p.string(),
      description: p.string().optional(),
      per_page: p.perPage(),
      cleared: p.string().nullable().optional(),
      actions: p.array(z.object({ action: p.string(), content: p.string().optional() })).optional(),
      settings: z.object({ on: p.bool().optional() }).optional(),
    })
    .superRefine((v, ctx) => atLeastOneOf(v, ['description', 'cleared'], ctx));

  it('reads null as the parameter left out, at any depth; a nullable parameter keeps it', () => {
    expect(
      validateParams(schema, {
        name: 'n',
        description: null,
        per_page: null,
        cleared: null,
        actions: [{ action: 'create', content: null }],
        settings: { on: null },
      }),
    ).toEqual({ name: 'n', per_page: 20, cleared: null, actions: [{ action: 'create' }], settings: {} });
  });

  it('names a required parameter given as null missing, and refinements see it left out', () => {
    expect(errorOf(() => validateParams(schema, { name: null })).body).toEqual({ error: 'name is missing' });
    expect(errorOf(() => validateParams(schema, { name: 'n', description: null })).body).toEqual({
      error: 'description, cleared are missing, at least one parameter must be provided',
    });
  });

  it('gives back the very object when it holds no null', () => {
    const input = { name: 'n', actions: [{ action: 'x' }], extra: { deep: [1, 'two'] } };
    expect(withoutNulls(schema, input)).toBe(input);
    expect(withoutNulls(undefined, { a: { b: null }, c: [null] })).toEqual({ a: {}, c: [null] });
  });
});
