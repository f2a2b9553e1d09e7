import type { Middleware } from 'koa';
import { koaBody } from 'koa-body';
import type { AppContext, AppState } from '../http/context.js';
import type { RequestParams } from '../services/oauth.js';

/** Form posts of the web pages: urlencoded only, small. */
export const parseForm = koaBody({
  json: false,
  multipart: false,
  text: false,
  urlencoded: true,
  formLimit: '64kb',
  queryString: { depth: 1, arrayLimit: 50, parameterLimit: 200 },
}) as unknown as Middleware<AppState>;

/** The posted form as a plain object. */
export function formBody(ctx: AppContext): Record<string, unknown> {
  const body = ctx.request.body;
  return body && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>) : {};
}

/** A field's value; `user[login]` is read from the nested object the form parser builds. */
function lookup(form: Record<string, unknown>, name: string): unknown {
  const nested = /^([^[\]]+)\[([^[\]]+)\]$/.exec(name);
  if (!nested) return form[name];
  const parent = form[nested[1] as string];
  return parent && typeof parent === 'object' && !Array.isArray(parent)
    ? (parent as Record<string, unknown>)[nested[2] as string]
    : undefined;
}

/** One text field (the last value when the field was sent several times, as Rails reads forms). */
export function field(form: Record<string, unknown>, name: string): string {
  const value = lookup(form, name);
  const last = Array.isArray(value) ? value[value.length - 1] : value;
  return typeof last === 'string' ? last : '';
}

/** Every value of a repeatable field. */
export function fieldList(form: Record<string, unknown>, name: string): string[] {
  const value = form[name];
  const list = Array.isArray(value) ? value : value === undefined ? [] : [value];
  return list.filter((v): v is string => typeof v === 'string');
}

/** A form or query as every value of each name, for the OAuth request checks. */
export function toRequestParams(form: Record<string, unknown>): RequestParams {
  const params: RequestParams = new Map();
  for (const [name, value] of Object.entries(form)) {
    const list = (Array.isArray(value) ? value : [value]).filter((v): v is string => typeof v === 'string');
    params.set(name, list);
  }
  return params;
}

export function queryParams(querystring: string): RequestParams {
  const params: RequestParams = new Map();
  for (const [name, value] of new URLSearchParams(querystring)) params.set(name, [...(params.get(name) ?? []), value]);
  return params;
}
