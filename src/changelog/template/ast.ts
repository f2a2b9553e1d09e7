/**
 * The syntax tree of GitLab's changelog template language (lib/gitlab/template_parser/ast.rb):
 * text, `{{ selector }}`, `{% if %}…{% else %}…{% end %}` and `{% each %}…{% end %}`.
 */

/** One step of a dotted path: a key name (or `it`) or an array index. */
export type Step = { kind: 'name'; name: string } | { kind: 'index'; index: number };

export type TemplateNode =
  | { kind: 'text'; text: string }
  | { kind: 'variable'; path: Step[] }
  | { kind: 'if'; path: Step[]; then: TemplateNode[]; else: TemplateNode[] }
  | { kind: 'each'; path: Step[]; body: TemplateNode[] };
