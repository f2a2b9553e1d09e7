// I18n.transliterate's approximations that Unicode decomposition does not give.
const SPECIAL: Record<string, string> = {
  Æ: 'AE',
  æ: 'ae',
  Ð: 'D',
  ð: 'd',
  Ø: 'O',
  ø: 'o',
  Þ: 'Th',
  þ: 'th',
  ß: 'ss',
  Đ: 'D',
  đ: 'd',
  Ħ: 'H',
  ħ: 'h',
  ı: 'i',
  Ĳ: 'IJ',
  ĳ: 'ij',
  ĸ: 'k',
  Ŀ: 'L',
  ŀ: 'l',
  Ł: 'L',
  ł: 'l',
  ŉ: "'n",
  Ŋ: 'NG',
  ŋ: 'ng',
  Œ: 'OE',
  œ: 'oe',
  Ŧ: 'T',
  ŧ: 't',
  ſ: 's',
  '×': 'x',
};

/**
 * I18n.transliterate with its default rules: Latin letters lose their accents, anything else
 * outside ASCII becomes `?`.
 */
export function transliterate(text: string): string {
  let out = '';
  for (const char of text) {
    if (char.charCodeAt(0) < 0x80) out += char;
    else if (SPECIAL[char] !== undefined) out += SPECIAL[char];
    else {
      const code = char.codePointAt(0) ?? 0;
      const base = char.normalize('NFD').replace(/[\u0300-\u036f]/g, '');
      out += code <= 0x24f && /^[\x20-\x7e]+$/.test(base) ? base : '?';
    }
  }
  return out;
}
