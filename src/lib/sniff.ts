/**
 * The content type Workhorse gives a raw blob: Go's http.DetectContentType on the first 512
 * bytes (the signatures that matter for files in repositories), SVG recognised first, and any
 * text served as `text/plain; charset=utf-8` so that HTML or scripts never run in a browser.
 * `inline` is true for text, images (but not SVG), video and PDF, as Workhorse decides.
 */
export function sniffContent(head: Buffer): { type: string; inline: boolean } {
  const ascii = head.toString('latin1');
  if (/<svg[\s>]/i.test(ascii) && !/[\0]/.test(ascii)) return { type: 'image/svg+xml', inline: false };
  for (const [signature, type] of SIGNATURES) {
    if (head.length >= signature.length && head.subarray(0, signature.length).equals(signature)) {
      return { type, inline: /^(image|video)\//.test(type) || type === 'application/pdf' };
    }
  }
  if (/^RIFF....WEBP/s.test(ascii)) return { type: 'image/webp', inline: true };
  if (/^....ftyp(mp4|isom|M4V)/s.test(ascii)) return { type: 'video/mp4', inline: true };
  // Go: binary when any byte is a control character other than TAB, LF, FF, CR and ESC.
  for (const byte of head) {
    if (byte <= 0x08 || byte === 0x0b || (byte >= 0x0e && byte <= 0x1a) || (byte >= 0x1c && byte <= 0x1f)) {
      return { type: 'application/octet-stream', inline: false };
    }
  }
  return { type: 'text/plain; charset=utf-8', inline: true };
}

const SIGNATURES: [Buffer, string][] = [
  [Buffer.from('%PDF-'), 'application/pdf'],
  [Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), 'image/png'],
  [Buffer.from([0xff, 0xd8, 0xff]), 'image/jpeg'],
  [Buffer.from('GIF87a'), 'image/gif'],
  [Buffer.from('GIF89a'), 'image/gif'],
  [Buffer.from('BM'), 'image/bmp'],
  [Buffer.from([0x00, 0x00, 0x01, 0x00]), 'image/x-icon'],
  [Buffer.from([0x1f, 0x8b, 0x08]), 'application/x-gzip'],
  [Buffer.from('PK\x03\x04'), 'application/zip'],
  [Buffer.from('Rar!\x1a\x07'), 'application/x-rar-compressed'],
  [Buffer.from([0x00, 0x61, 0x73, 0x6d]), 'application/wasm'],
  [Buffer.from('OggS'), 'application/ogg'],
  [Buffer.from('ID3'), 'audio/mpeg'],
];
