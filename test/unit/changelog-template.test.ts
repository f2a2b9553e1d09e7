import { describe, expect, it } from 'vitest';
import { ChangelogError } from '../../src/changelog/errors.js';
import { LOOP_DEPTH_MESSAGE, renderTemplate, type TemplateValue } from '../../src/changelog/template/evaluator.js';
import { PARSE_ERROR_PREFIX, PARSE_TIMEOUT_MESSAGE, parseTemplate } from '../../src/changelog/template/parser.js';
import { vectorsOf } from '../support/changelog-vectors.js';

const render = (template: string, data: TemplateValue = {}) => renderTemplate(parseTemplate(template), data);

/** The error a template raises when parsed (or null when it parses). */
function parseError(template: string): string | null {
  try {
    parseTemplate(template);
    return null;
  } catch (error) {
    if (!(error instanceof ChangelogError)) throw error;
    return error.message;
  }
}

describe('changelog template vectors', () => {
  for (const v of vectorsOf('template_parse')) {
    it(`${v.name}`, () => {
      const error = parseError(v.input.template);
      if (v.expected.parses) expect(error).toBeNull();
      else expect(error?.startsWith(v.expected.error_prefix)).toBe(true);
    });
  }
  for (const v of vectorsOf('template_render')) {
    it(`${v.name}`, () => {
      if ('error' in v.expected) {
        expect(() => render(v.input.template, v.input.data)).toThrow(new ChangelogError(v.expected.error));
      } else {
        expect(render(v.input.template, v.input.data)).toBe(v.expected.output);
      }
    });
  }
  for (const v of vectorsOf('template_render_cases')) {
    it(`${v.name}`, () => {
      expect(v.expected.all_cases_match).toBe(true);
      for (const c of v.input.cases) expect(render(v.input.template, c.data), JSON.stringify(c.data)).toBe(c.output);
    });
  }
});

describe('changelog template syntax', () => {
  it.each([
    '{{ x }}',
    '{{x}}',
    '{%if x%}a{%end%}',
    '{%  if  x  %}a{%  end  %}',
    '{{{x}}}',
    '{{ a.b.0.c }}',
    '{{\n x \n}}',
    '{% if x %}{% else %}{% end %}',
    '{% each x %}{% each y %}{% end %}{% end %}',
    'a { b } {x}',
    '%} and }} are text',
    '#{exit}',
    '\\t keeps its backslash',
    '\\{x}',
    'line\r\n',
    '{{end}}{{if}}{{each}}{{else}}',
    '{{1234567890}}',
  ])('accepts %j', (template) => {
    expect(parseError(template)).toBeNull();
  });

  it.each([
    '{% ifx %}{% end %}',
    '{% if %}{% end %}',
    '{{ }}',
    "{{ 'x' }}",
    '{{<%= x %>}}',
    '{% each',
    '{% if x %}',
    '{% else %}',
    '{% end %}',
    '{% each x %}{% else %}{% end %}',
    '{% if x %}a{% elsif y %}b{% end %}',
    '{{ foo1 }}',
    '{{ a | upcase }}',
    '{{ 12345678901 }}',
    '{{ a. }}',
    '\\{{x}}',
    '\\{% if x %}{% end %}',
    '\\\\',
    'ends with a backslash\\',
    '{% each {{foo}} %}\n{% end %}\n',
    '{% if x %}{% end',
  ])('rejects %j with GitLab prefix', (template) => {
    const error = parseError(template);
    expect(error).not.toBeNull();
    expect(error?.startsWith(PARSE_ERROR_PREFIX)).toBe(true);
  });

  it('names where it stopped, as Parslet does', () => {
    expect(parseError('ok\n{% end %}')).toBe(
      `${PARSE_ERROR_PREFIX}Don't know what to do with "{% end %}" at line 2 char 1.`,
    );
  });

  it('fails with the timeout message rather than crashing on absurd nesting', () => {
    const deep = '{% if a %}'.repeat(50_000) + '{% end %}'.repeat(50_000);
    expect(parseError(deep)).toBe(PARSE_TIMEOUT_MESSAGE);
  });
});

describe('changelog template whitespace', () => {
  it('a statement tag swallows exactly one newline after it', () => {
    expect(render('{% if a %}\n\nx{% end %}\n\n', { a: true })).toBe('\nx\n');
  });
  it('a variable tag swallows nothing', () => {
    expect(render('{{ a }}\n', { a: 'x' })).toBe('x\n');
  });
  it('a backslash at the end of a line joins it with the next', () => {
    expect(render('foo \\\nbar\\\nbaz\n')).toBe('foo barbaz\n');
  });
  it('a backslash before other text stays', () => {
    expect(render('a\\tb \\{c}')).toBe('a\\tb \\{c}');
  });
  it('only \\n counts as a newline: CRLF keeps its \\r', () => {
    expect(render('{% if a %}\r\nx\\\r\ny{% end %}', { a: true })).toBe('\r\nx\\\r\ny');
  });
});

describe('changelog template evaluation', () => {
  it('prints numbers, booleans, null and Ruby-inspected collections', () => {
    expect(
      render('{{n}} {{t}} {{f}} [{{z}}] {{a}} {{h}}', {
        n: 0,
        t: true,
        f: false,
        z: null,
        a: [1, 'x'],
        h: { values: 10 },
      }),
    ).toBe('0 true false [] [1, "x"] {"values" => 10}');
  });
  it('truthiness: 0 is true, empty map is false, missing path is false', () => {
    const t = '{% if v %}T{% else %}F{% end %}';
    expect(render(t, { v: 0 })).toBe('T');
    expect(render(t, { v: {} })).toBe('F');
    expect(render(t, { v: { a: 1 } })).toBe('T');
    expect(render(t, { v: null })).toBe('F');
    expect(render(t, {})).toBe('F');
    expect(render('{% if v.x.y %}T{% else %}F{% end %}', { v: 'string' })).toBe('F');
  });
  it('each over a map yields [key, value] pairs', () => {
    expect(render('{% each pairs %}{{0}}={{1}};{% end %}', { pairs: { a: 1, b: 'two' } })).toBe('a=1;b=two;');
  });
  it('each over a string, number or null renders nothing', () => {
    for (const v of ['abc', 3, null]) expect(render('[{% each v %}x{% end %}]', { v })).toBe('[]');
  });
  it('inside each only the element is in scope', () => {
    expect(render('{% each xs %}{{outer}}{{it}}{% end %}', { outer: 'O', xs: [1, 2] })).toBe('12');
  });
  it('it works as any step of a path', () => {
    expect(render('{% each xs %}{{it.name}}{{ it.it.name }}{% end %}', { xs: [{ name: 'a' }] })).toBe('aa');
  });
  it('an integer step on a map or out of range is empty; a name on an array is empty', () => {
    expect(render('[{{h.1}}][{{xs.5}}][{{xs.name}}]', { h: { '1': 'x' }, xs: [1] })).toBe('[][][]');
  });
  it('four nested loops are allowed', () => {
    const data = { a: [{ b: [{ c: [{ d: [{ name: 'deep' }] }] }] }] };
    expect(
      render('{% each a %}{% each b %}{% each c %}{% each d %}{{name}}{% end %}{% end %}{% end %}{% end %}', data),
    ).toBe('deep');
  });
  it('a fifth nested loop fails on entry even when its list is empty', () => {
    const data = { a: [{ b: [{ c: [{ d: [{ e: [] }] }] }] }] };
    const template =
      '{% each a %}{% each b %}{% each c %}{% each d %}{% each e %}{% end %}{% end %}{% end %}{% end %}{% end %}';
    expect(() => render(template, data)).toThrow(new ChangelogError(LOOP_DEPTH_MESSAGE));
  });
  it('nested loops that never run raise nothing', () => {
    const template =
      '{% each a %}{% each b %}{% each c %}{% each d %}{% each e %}{% end %}{% end %}{% end %}{% end %}{% end %}';
    expect(render(template, { a: [] })).toBe('');
  });
});
