import { describe, expect, it } from 'vitest';
import { formatContentDisposition } from '../../src/lib/content-disposition.js';
import { transliterate } from '../../src/lib/transliterate.js';
import { parameterize } from '../../src/services/projects.js';

describe('transliterate (I18n.transliterate)', () => {
  it('drops accents, spells out ligatures and marks everything else outside ASCII with ?', () => {
    expect(transliterate('Crème Brûlée')).toBe('Creme Brulee');
    expect(transliterate('Straße Œuvre ĸ')).toBe('Strasse OEuvre k');
    expect(transliterate('データ.txt')).toBe('???.txt');
  });
});

describe('parameterize (String#parameterize)', () => {
  it('joins ASCII words with dashes, lower-cased, and trims the ends', () => {
    expect(parameterize('  Crème Brûlée!  ')).toBe('creme-brulee');
    expect(parameterize('Release_2024 -- Notes')).toBe('release_2024-notes');
    expect(parameterize('日本')).toBe('');
  });
});

describe('Content-Disposition', () => {
  it('writes the transliterated name and the UTF-8 name, as Rails does', () => {
    expect(formatContentDisposition('inline', 'résumé v1.pdf')).toBe(
      `inline; filename="resume v1.pdf"; filename*=UTF-8''r%C3%A9sum%C3%A9%20v1.pdf`,
    );
    expect(formatContentDisposition('attachment')).toBe('attachment');
  });
});
