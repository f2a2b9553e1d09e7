import { describe, expect, it } from 'vitest';
import { parseSignature } from '../../src/git/commit.js';

/** The pattern parseSignature used to run; its index-based reading must agree with it everywhere. */
function reference(line: string) {
  const match = /^(.*?) ?<([^>]*)> (-?\d+) ([+-])(\d\d)(\d\d)$/.exec(line);
  if (!match) return { name: line, email: '', time: 0, tzMinutes: 0 };
  const sign = match[4] === '-' ? -1 : 1;
  return {
    name: match[1],
    email: match[2],
    time: Number(match[3]),
    tzMinutes: sign * (Number(match[5]) * 60 + Number(match[6])),
  };
}

describe('parseSignature', () => {
  it('reads name, email, time and offset', () => {
    expect(parseSignature('Carol Écrivain <carol@example.org> 1705312800 -0130')).toEqual({
      name: 'Carol Écrivain',
      email: 'carol@example.org',
      time: 1705312800,
      tzMinutes: -90,
    });
  });

  it('agrees with the regular expression on odd and broken lines', () => {
    const fixed = [
      'A<B <e@x> 1 +0000',
      'A  <a@x> 1 -0130',
      '<a@x> 1 +0000',
      'A <> 1 +0000',
      'A <a@x> x +0000',
      'A <a>b <c@x> 5 +0100',
      'A <a@x> 1 +000',
      '',
      'A <a<b@x> 1 +0000',
      'A <a@x>> 1 +0000',
      'x> <y> 2 +0000',
      'A <x> 1 +0000> 2 +0000',
    ];
    // A deterministic pseudo-random mix of the characters that matter.
    const chars = ['a', ' ', '<', '>', '1', '+', '-', '0'];
    const tails = ['> 12 +0000', ' <e> 3 -0100', '> 1 +01000', ''];
    let x = 12345;
    const next = () => {
      x = (x * 1103515245 + 12345) % 2147483648;
      return x;
    };
    for (let i = 0; i < 20_000; i++) {
      let line = '';
      for (let j = next() % 12; j > 0; j--) line += chars[next() % chars.length];
      fixed.push(line + tails[i % tails.length]);
    }
    for (const line of fixed) expect(parseSignature(line), JSON.stringify(line)).toEqual(reference(line));
  });
});
