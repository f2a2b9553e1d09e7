import { Readable } from 'node:stream';

/**
 * The bytes `start` to `end` (inclusive) of a stream that cannot seek: what comes before is read
 * and dropped, and once `end` is passed the source is destroyed and `stop` called (the process
 * writing it need not finish).
 */
export function sliceStream(source: Readable, start: number, end: number, stop: () => void): Readable {
  async function* slice() {
    let offset = 0;
    try {
      for await (const chunk of source) {
        const bytes = chunk as Buffer;
        const from = Math.max(start - offset, 0);
        const to = Math.min(end + 1 - offset, bytes.length);
        offset += bytes.length;
        if (to > from) yield bytes.subarray(from, to);
        if (offset > end) return;
      }
    } finally {
      stop();
    }
  }
  return Readable.from(slice(), { objectMode: false });
}

/**
 * A whole body read into memory, refused with `tooLarge()` as soon as it passes `limit` bytes
 * (nothing more is read then).
 */
export async function readLimited(
  source: AsyncIterable<unknown>,
  limit: number,
  tooLarge: () => Error,
): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of source) {
    size += (chunk as Buffer).length;
    if (size > limit) throw tooLarge();
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}
