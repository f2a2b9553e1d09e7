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
