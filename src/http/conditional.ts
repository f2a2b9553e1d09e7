import type { Context } from 'koa';

/**
 * Conditional and range requests (RFC 9110 §13 and §14) for bodies named by content: archives
 * (the commit and the variant) and raw blobs (the blob id). One range per request; a request
 * for several is answered whole, as the RFC allows.
 */

/** An inclusive byte range of a body whose size is known. */
export interface ByteRange {
  start: number;
  end: number;
}

/** A `Range: bytes=...` as asked, before the size is known: `first-[last]` or `-suffix`. */
export type RangeRequest = { first: number; last?: number } | { suffix: number };

const TAG = /(?:W\/)?"[^"]*"|\*/g;
const opaque = (tag: string) => tag.replace(/^W\//, '');

/** `If-None-Match` names the current representation (weak comparison): answer 304. GET and HEAD only. */
export function notModified(ctx: Context, etag: string): boolean {
  if (ctx.method !== 'GET' && ctx.method !== 'HEAD') return false;
  const header = ctx.get('If-None-Match');
  if (!header) return false;
  return (header.match(TAG) ?? []).some((tag) => tag === '*' || opaque(tag) === etag);
}

/**
 * The range a GET asks for, or null when the whole body is to be sent: no `Range`, a malformed
 * or multiple one, or an `If-Range` that does not name the current representation (strong
 * comparison; a date never does, the bodies here have no Last-Modified).
 */
export function requestedRange(ctx: Context, etag: string): RangeRequest | null {
  if (ctx.method !== 'GET') return null;
  const header = ctx.get('Range');
  if (!header) return null;
  const ifRange = ctx.get('If-Range');
  if (ifRange && ifRange.trim() !== etag) return null;
  const match = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(header);
  if (!match) return null;
  const [, first, last] = match as unknown as [string, string, string];
  if (first === '' && last === '') return null;
  if (first === '') return { suffix: Number(last) };
  if (last !== '' && Number(last) < Number(first)) return null;
  return last === '' ? { first: Number(first) } : { first: Number(first), last: Number(last) };
}

/** The bytes a range covers in a body of `size`, or null when it covers none (416). */
export function resolveRange(range: RangeRequest, size: number): ByteRange | null {
  if ('suffix' in range) {
    if (range.suffix === 0 || size === 0) return null;
    return { start: Math.max(0, size - range.suffix), end: size - 1 };
  }
  if (range.first >= size) return null;
  return { start: range.first, end: Math.min(range.last ?? size - 1, size - 1) };
}

/** 206 for `range` of a body of `size`: Content-Range and Content-Length; the caller sets the body. */
export function partialContent(ctx: Context, range: ByteRange, size: number): void {
  ctx.status = 206;
  ctx.set('Content-Range', `bytes ${range.start}-${range.end}/${size}`);
}

/** 416 with the size the range missed. */
export function rangeNotSatisfiable(ctx: Context, size: number): void {
  ctx.status = 416;
  ctx.set('Content-Range', `bytes */${size}`);
  ctx.body = { message: '416 Range Not Satisfiable' };
}
