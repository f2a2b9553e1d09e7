import type { AppContext } from './context.js';

const IMAGE = ['image/jpeg', 'image/apng', 'image/png', 'image/webp', 'image/svg+xml', 'image/*'];
const MEDIA = [
  'video/webm',
  'video/ogg',
  'video/*',
  'application/ogg',
  'audio/webm',
  'audio/ogg',
  'audio/wav',
  'audio/*',
];
const REFUSED_TYPES = new Set([...IMAGE, ...MEDIA, 'text/css']);
// GitLab also refuses `cors`; but Node's fetch (undici) sends `Sec-Fetch-Mode: cors` on every
// request, which would refuse API clients such as @gitbeaker/rest. Embedding tags (script, img,
// link) fetch in `no-cors` mode, so refusing that mode still stops hotlinking.
const REFUSED_FETCH_MODES = new Set(['no-cors', 'websocket']);

/** Media types of an Accept header, most preferred first (stable for equal q); null if malformed. */
function acceptedTypes(header: string): string[] | null {
  const entries: { type: string; q: number; index: number }[] = [];
  for (const [index, part] of header.split(',').entries()) {
    const [type = '', ...parameters] = part.split(';').map((s) => s.trim().toLowerCase());
    if (type === '') continue;
    if (!/^[\w.+*-]+\/[\w.+*-]+$/.test(type)) return null;
    const q = parameters.find((x) => x.startsWith('q='));
    entries.push({ type, q: q ? Number(q.slice(2)) || 0 : 1, index });
  }
  return entries.sort((a, b) => b.q - a.q || a.index - b.index).map((e) => e.type);
}

/**
 * GitLab's HotlinkingDetector: a download embedded in another page (a script, image, media or
 * stylesheet tag) is refused with 406. Malformed Accept headers are refused too.
 */
export function isHotlinking(ctx: AppContext): boolean {
  const mode = ctx.get('Sec-Fetch-Mode').trim();
  if (mode !== '' && REFUSED_FETCH_MODES.has(mode)) return true;
  const accept = ctx.get('Accept').trim();
  if (accept === '') return false;
  const types = acceptedTypes(accept);
  if (types === null) return true;
  const first = types[0];
  if (first === undefined) return false;
  if (IMAGE.includes(first) && types.includes('application/x-ms-application')) return false;
  return REFUSED_TYPES.has(first);
}
