import type { Context } from 'koa';

/** Above this many rows GitLab stops counting: no X-Total, X-Total-Pages or rel="last". */
export const MAX_COUNT = 10_000;

export interface PageRequest {
  page: number;
  per_page: number;
}

/** limit/offset for a page request. */
export function pageWindow(req: PageRequest): { limit: number; offset: number } {
  return { limit: req.per_page, offset: (req.page - 1) * req.per_page };
}

/** The URL of this request on `baseUrl`, with `page` and `per_page` replaced. */
export function pageUrl(ctx: Context, baseUrl: string, page: number, perPage: number): string {
  const query = new URLSearchParams(ctx.querystring);
  query.set('page', String(page));
  query.set('per_page', String(perPage));
  return `${baseUrl}${ctx.path}?${query.toString()}`;
}

/**
 * Sets GitLab's offset pagination headers. `total` is null when the count passed MAX_COUNT,
 * in which case `hasNext` says whether another page exists.
 */
export function setPaginationHeaders(
  ctx: Context,
  baseUrl: string,
  req: PageRequest,
  total: number | null,
  hasNext?: boolean,
): void {
  const { page, per_page: perPage } = req;
  const totalPages = total === null ? null : Math.max(1, Math.ceil(total / perPage));
  const next = total === null ? (hasNext ? page + 1 : null) : page < (totalPages ?? 0) ? page + 1 : null;
  const prev = page > 1 ? page - 1 : null;
  ctx.set('X-Page', String(page));
  ctx.set('X-Per-Page', String(perPage));
  ctx.set('X-Next-Page', next === null ? '' : String(next));
  ctx.set('X-Prev-Page', prev === null ? '' : String(prev));
  if (total !== null && totalPages !== null) {
    ctx.set('X-Total', String(total));
    ctx.set('X-Total-Pages', String(totalPages));
  }
  const links: string[] = [];
  if (prev !== null) links.push(`<${pageUrl(ctx, baseUrl, prev, perPage)}>; rel="prev"`);
  if (next !== null) links.push(`<${pageUrl(ctx, baseUrl, next, perPage)}>; rel="next"`);
  links.push(`<${pageUrl(ctx, baseUrl, 1, perPage)}>; rel="first"`);
  if (totalPages !== null) links.push(`<${pageUrl(ctx, baseUrl, totalPages, perPage)}>; rel="last"`);
  ctx.set('Link', links.join(', '));
}

/** Paginates an in-memory list (GitLab's array pagination) and sets the headers. */
export function paginateArray<T>(ctx: Context, baseUrl: string, req: PageRequest, items: readonly T[]): T[] {
  const { limit, offset } = pageWindow(req);
  setPaginationHeaders(ctx, baseUrl, req, items.length);
  return items.slice(offset, offset + limit);
}

/**
 * Runs a page query and a capped count query, sets the headers and returns the rows.
 * `count(limit)` must return min(total, limit).
 */
export async function paginateQuery<T>(
  ctx: Context,
  baseUrl: string,
  req: PageRequest,
  rows: (window: { limit: number; offset: number }) => Promise<T[]>,
  count: (limit: number) => Promise<number>,
): Promise<T[]> {
  const window = pageWindow(req);
  // One extra row tells whether a next page exists when the total is not counted.
  const [items, counted] = await Promise.all([
    rows({ limit: window.limit + 1, offset: window.offset }),
    count(MAX_COUNT + 1),
  ]);
  const hasNext = items.length > req.per_page;
  setPaginationHeaders(ctx, baseUrl, req, counted > MAX_COUNT ? null : counted, hasNext);
  return items.slice(0, req.per_page);
}
