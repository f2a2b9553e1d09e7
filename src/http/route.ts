import fs from 'node:fs/promises';
import Router from '@koa/router';
import type { Part } from 'formidable';
import type { Middleware } from 'koa';
import { koaBody } from 'koa-body';
import qs from 'qs';
import { z } from 'zod';
import { getApplicationSettings } from '../services/application-settings.js';
import { ANONYMOUS, API_SCOPES, type ScopeRule } from '../services/auth.js';
import { instanceWritable, READ_ONLY_API_MESSAGE } from '../services/instance-access.js';
import { authenticate } from './auth.js';
import type { AppContext, AppState } from './context.js';
import { ApiError, badRequest, forbidden, payloadTooLarge, unauthorized, unsupportedMediaType } from './errors.js';
import { type Params, validateParams } from './params.js';

export type Method = 'get' | 'post' | 'put' | 'delete' | 'patch';

export interface RouteOptions<S extends z.ZodType> {
  /** One line for the OpenAPI document. */
  summary: string;
  /** The route's parameters: a zod object over merged path, query and body values. */
  params?: S;
  /** `required`: anonymous callers get 401. Default `optional` (visibility rules decide). */
  auth?: 'optional' | 'required';
  /**
   * Administrators only, checked before the parameters as GitLab's `before {
   * authenticated_as_admin! }` is: 401 for anonymous callers, 403 for other users.
   */
  admin?: boolean;
  /** Scopes this endpoint accepts besides `api` and `read_api` (e.g. `read_user`). */
  scopes?: readonly ScopeRule[];
  /**
   * `false` for endpoints authenticated by a token of their own (runner, job): user credentials
   * are not read at all, as GitLab's lib/api/ci/runner.rb never loads `current_user`; a blocked
   * user's or a narrowly scoped token is then the same as none.
   */
  credentials?: false;
  /**
   * An authorization that runs before the parameters are validated, as a Grape `before` block
   * (`before { authorize_admin_project }`) does: a caller who may not use the endpoint gets 403
   * or 404 whatever the parameters. It receives the raw parameters (path ones are strings).
   */
  before?: (ctx: AppContext, raw: Params) => Promise<void>;
  /** Handles its own body (streams): no body parsing. */
  rawBody?: boolean;
  tags?: string[];
}

export type Handler<S extends z.ZodType> = (ctx: AppContext, params: z.output<S>) => Promise<void> | void;

export interface Operation {
  method: Method;
  /** Koa path (`/projects/:id`). */
  path: string;
  summary: string;
  tags: string[];
  params: z.ZodType | undefined;
  auth: 'optional' | 'required';
}

export const MAX_JSON_BODY = '20mb';

/**
 * A body that cannot be read (malformed JSON, a broken multipart part, a multipart type with no
 * boundary, a bad charset) is the client's fault: GitLab's 400, or 413 / 415 where those apply.
 */
function bodyError(error: unknown): ApiError {
  const failure = error as { status?: number; statusCode?: number; httpCode?: number };
  const status = failure.status ?? failure.statusCode ?? failure.httpCode;
  if (status === 413) return payloadTooLarge();
  if (status === 415) return unsupportedMediaType();
  return badRequest('The request body could not be parsed');
}

/**
 * A multipart part with a filename is a file, also without a Content-Type (python-gitlab sends
 * avatars so): formidable would read it as a text field, which a binary file's NUL bytes then
 * make a 400. It is `application/octet-stream`, as RFC 7578 §4.4 has it.
 */
function onPart(part: Part, handle: (part: Part) => void): void {
  if (part.originalFilename !== null && !part.mimetype) part.mimetype = 'application/octet-stream';
  handle(part);
}

/** Bytes in a MiB, the unit of `max_attachment_size`. */
const BYTES_PER_MIB = 1024 * 1024;
/** `max_attachment_size`'s default (MiB), used when the setting is unreadable. */
const DEFAULT_MAX_ATTACHMENT_MIB = 10;

/** A body parser whose uploaded files may each be at most `maxFileBytes` (and together as much). */
function bodyParser(maxFileBytes: number): Middleware {
  return koaBody({
    json: true,
    urlencoded: true,
    multipart: true,
    text: false,
    jsonLimit: MAX_JSON_BODY,
    formLimit: MAX_JSON_BODY,
    parsedMethods: ['POST', 'PUT', 'PATCH', 'DELETE'] as never[],
    queryString: { depth: 10, arrayLimit: 1000, parameterLimit: 10000 },
    formidable: { maxFileSize: maxFileBytes, maxFields: 10000, onPart },
    onError: (error) => {
      throw bodyError(error);
    },
  }) as Middleware;
}

/** One parser per upload limit in use (the setting changes rarely; each parser is kept). */
const parsers = new Map<number, Middleware>();

/**
 * The parser for this request: a multipart body's files are limited by the application setting
 * `max_attachment_size` (MiB) as it is now, beyond which the request is GitLab's 413.
 */
async function parserFor(ctx: AppContext): Promise<Middleware> {
  let mib = DEFAULT_MAX_ATTACHMENT_MIB;
  if (ctx.is('multipart')) {
    const value = Number((await getApplicationSettings(ctx.state.deps)).values.max_attachment_size);
    if (Number.isFinite(value) && value > 0) mib = value;
  }
  const bytes = Math.floor(mib * BYTES_PER_MIB);
  let parser = parsers.get(bytes);
  if (!parser) {
    parser = bodyParser(bytes);
    parsers.set(bytes, parser);
  }
  return parser;
}

/** Parses the body; the files a multipart body left in the temporary directory go when the request ends. */
const parseBody: Middleware<AppState, AppContext> = async (ctx, next) => {
  try {
    await (await parserFor(ctx))(ctx, next);
  } finally {
    const files = Object.values(ctx.request.files ?? {}).flat();
    await Promise.all(files.map((file) => fs.rm(file.filepath, { force: true })));
  }
};

/** Rack-style query parsing: `a[]=x&a[]=y` → `{a: [x, y]}`; a repeated plain name keeps the last value. */
export function parseQuery(querystring: string): Params {
  return qs.parse(querystring, { depth: 10, arrayLimit: 1000, parameterLimit: 10000, duplicates: 'last' }) as Params;
}

/** A multipart file part as a parameter (Grape's File): what it was called, its type and size. */
export interface UploadedFile {
  filename: string | null;
  type: string;
  size: number;
  /** Where it waits until the request ends. */
  path: string;
}

/** Whether a parameter is an uploaded file (a string field is not). */
export const isUploadedFile = (value: unknown): value is UploadedFile =>
  typeof value === 'object' && value !== null && typeof (value as UploadedFile).path === 'string';

function uploadedFiles(ctx: AppContext): Params {
  const files: Params = {};
  for (const [name, value] of Object.entries(ctx.request.files ?? {})) {
    const list = (Array.isArray(value) ? value : [value]).map(
      (file): UploadedFile => ({
        filename: file.originalFilename,
        type: file.mimetype ?? 'application/octet-stream',
        size: file.size,
        path: file.filepath,
      }),
    );
    files[name] = list.length === 1 ? list[0] : list;
  }
  return files;
}

/** Query, then body (fields and files), then path parameters: later sources win, as in Grape. */
export function mergedParams(ctx: AppContext): Params {
  const body = ctx.request.body;
  const bodyParams = body && typeof body === 'object' && !Array.isArray(body) ? (body as Params) : {};
  const files = ctx.request.files ? uploadedFiles(ctx) : undefined;
  return { ...parseQuery(ctx.querystring), ...bodyParams, ...files, ...ctx.params };
}

/** A UTF-16 surrogate without its pair: a JSON `"\ud800"` escape, which no UTF-8 text can hold. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * True when a parameter value (nested up to GitLab's depth of 3) holds a NUL character or a lone
 * surrogate (GitLab's HandleMalformedStrings middleware refuses both: null bytes and strings that
 * are not valid UTF-8).
 */
function hasMalformedString(value: unknown, depth = 0): boolean {
  if (typeof value === 'string') return value.includes('\0') || LONE_SURROGATE.test(value);
  if (depth > 2 || value === null || typeof value !== 'object') return false;
  return Object.values(value).some((v) => hasMalformedString(v, depth + 1));
}

/**
 * The key of a path below the prefix: its first segment and its third (`/projects/:id/repository/
 * tree` → `projects/repository`), lowercased as the routers match without case. Every route and
 * every request path it can match share a key, so a request is matched against the few routes of
 * its key instead of all of them (matching all took half of a small read's time).
 */
function routeKey(path: string): string {
  const segments = path.split('/', 4);
  return `${segments[1] ?? ''}/${segments[3] ?? ''}`.toLowerCase();
}

/**
 * A router whose routes declare their parameters once: the zod schema validates requests and
 * feeds the OpenAPI document. Each route runs: authenticate → validate params → handler.
 */
export class ApiRouter {
  private readonly routers = new Map<string, { router: Router<AppState>; dispatch: Middleware<AppState> }>();
  readonly operations: Operation[] = [];

  constructor(readonly prefix = '') {}

  /** Every mounted layer (method and path), in registration order within a key. */
  get layers(): { methods: string[]; path: string }[] {
    return [...this.routers.values()].flatMap(({ router }) =>
      router.stack.map((layer) => ({ methods: layer.methods, path: String(layer.path) })),
    );
  }

  /** The middleware that serves the routes. */
  routes(): Middleware<AppState> {
    const prefix = this.prefix.toLowerCase();
    return (ctx, next) => {
      if (!ctx.path.toLowerCase().startsWith(prefix)) return next();
      const entry = this.routers.get(routeKey(ctx.path.slice(prefix.length)));
      return entry ? entry.dispatch(ctx, next) : next();
    };
  }

  private routerFor(path: string): Router<AppState> {
    const key = routeKey(path);
    if (/[:({*?+]/.test(key)) throw new Error(`route ${path}: its 1st and 3rd segments must be literal`);
    let entry = this.routers.get(key);
    if (!entry) {
      const router = new Router<AppState>();
      entry = { router, dispatch: router.routes() as Middleware<AppState> };
      this.routers.set(key, entry);
    }
    return entry.router;
  }

  get<S extends z.ZodType>(path: string, options: RouteOptions<S>, handler: Handler<S>): this {
    return this.add('get', path, options, handler);
  }
  post<S extends z.ZodType>(path: string, options: RouteOptions<S>, handler: Handler<S>): this {
    return this.add('post', path, options, handler);
  }
  put<S extends z.ZodType>(path: string, options: RouteOptions<S>, handler: Handler<S>): this {
    return this.add('put', path, options, handler);
  }
  patch<S extends z.ZodType>(path: string, options: RouteOptions<S>, handler: Handler<S>): this {
    return this.add('patch', path, options, handler);
  }
  delete<S extends z.ZodType>(path: string, options: RouteOptions<S>, handler: Handler<S>): this {
    return this.add('delete', path, options, handler);
  }

  private add<S extends z.ZodType>(method: Method, path: string, options: RouteOptions<S>, handler: Handler<S>): this {
    const auth = options.auth ?? 'optional';
    const rules = [...(options.scopes ?? []), ...API_SCOPES];
    const schema = options.params ?? (z.object({}) as unknown as S);
    const chain: Middleware<AppState, AppContext>[] = [];
    if (method !== 'get' && !options.rawBody) chain.push(parseBody);
    chain.push(async (ctx) => {
      const raw = mergedParams(ctx);
      // GitLab's HandleMalformedStrings middleware: no valid request holds a NUL or a lone
      // surrogate (PostgreSQL text can hold neither).
      if (ctx.path.includes('\0') || hasMalformedString(raw)) throw badRequest();
      ctx.state.actor = options.credentials === false ? ANONYMOUS : await authenticate(ctx, raw, rules, auth);
      if (options.admin && !ctx.state.actor.user) throw unauthorized();
      if (options.admin && !ctx.state.actor.user?.admin) throw forbidden();
      // Maintenance mode leaves the API read-only for everyone but administrators.
      if (method !== 'get' && !(await instanceWritable(ctx.state.deps, ctx.state.actor.user ?? null))) {
        throw new ApiError(403, { message: READ_ONLY_API_MESSAGE });
      }
      if (options.before) await options.before(ctx, raw);
      const params = validateParams(schema, raw);
      await handler(ctx, params);
    });
    this.routerFor(path)[method](this.prefix + path, ...(chain as Middleware[]));
    this.operations.push({
      method,
      path: this.prefix + path,
      summary: options.summary,
      tags: options.tags ?? [],
      params: options.params,
      auth,
    });
    return this;
  }
}
