/**
 * Copies for long-lived caches. A value cut from a larger one shares its memory: kept in a cache,
 * it keeps the whole larger value alive for as long as it is cached.
 */

/**
 * `text` as a string of its own. V8 makes a substring (slice, split, a regex match) a view of the
 * string it was cut from, and a view kept as a cache key keeps that whole string alive: object ids
 * parsed out of a branch listing held one listing each in the cat-file cache (40 to 300 KiB with a
 * few thousand branches, one more with every branch the load benchmark pushed). A JSON round trip
 * copies it, lone surrogates included (a UTF-8 round trip would replace them).
 */
export function ownString(text: string): string {
  return JSON.parse(JSON.stringify(text)) as string;
}

/**
 * The bytes of `data` in a buffer of their own. A small buffer from Buffer.concat or
 * Buffer.allocUnsafe is a slice of Node's shared 8 KiB pool, and a slice keeps its whole pool slab
 * alive: a cached 250-byte commit held 8 KiB (under the load benchmark the workers' memory climbed
 * by about 0.7 MiB a minute each from this, far past what the cat-file cache's bound counts).
 */
export function ownBytes(data: Buffer): Buffer {
  if (data.byteOffset === 0 && data.byteLength === data.buffer.byteLength) return data;
  const copy = Buffer.allocUnsafeSlow(data.byteLength);
  data.copy(copy);
  return copy;
}
