/**
 * Parser of GitLab's changelog template language, a PEG (lib/gitlab/template_parser/parser.rb):
 *
 *   template := node*                          (the whole input, else a syntax error)
 *   node     := variable | if | each | escape | text | "\n"
 *   variable := "{"{2,} selector "}"{2,}
 *   selector := WS* step ("." step)* WS*       step := [A-Za-z_]+ | [0-9]{1,10}
 *   open     := "{%" WS*                       close := WS* "%}" "\n"?
 *   if       := open "if" [ \t]+ selector close node* (open "else" close node*)? open "end" close
 *   each     := open "each" [ \t]+ selector close node* open "end" close
 *   escape   := "\" "\n" (dropped) | "\" text (kept, backslash included)
 *   text     := ([^{\\\n]+ | "{" not followed by "{" or "%")+
 *
 * Alternatives are tried in order and the first match wins, as in Parslet. Every rule is
 * linear in its input, so unlike GitLab we need no parse timeout; only nesting so deep that it
 * exhausts the stack fails with GitLab's timeout message.
 */
import { ChangelogError } from '../errors.js';
import type { Step, TemplateNode } from './ast.js';

/** The prefix of every syntax error, as GitLab words it. */
export const PARSE_ERROR_PREFIX = 'Failed to parse the template: ';

const WS = /\s/;
const NAME_CHAR = /[A-Za-z_]/;
const DIGIT = /[0-9]/;
const MAX_INDEX_DIGITS = 10;

class Parser {
  pos = 0;
  constructor(private readonly src: string) {}

  private peek(offset = 0): string {
    return this.src[this.pos + offset] ?? '';
  }

  private literal(text: string): boolean {
    if (this.src.startsWith(text, this.pos)) {
      this.pos += text.length;
      return true;
    }
    return false;
  }

  private skipWhitespace(): void {
    while (this.pos < this.src.length && WS.test(this.peek())) this.pos++;
  }

  /** node* : as many nodes as match, stopping (without consuming) at the first that does not. */
  nodes(): TemplateNode[] {
    const out: TemplateNode[] = [];
    for (;;) {
      const node = this.node();
      if (!node) return out;
      // Adjacent text pieces are one text node: simpler trees, same output.
      const last = out[out.length - 1];
      if (node.kind === 'text' && last?.kind === 'text') last.text += node.text;
      else out.push(node);
    }
  }

  private node(): TemplateNode | null {
    if (this.pos >= this.src.length) return null;
    return (
      this.attempt(() => this.variable()) ??
      this.attempt(() => this.ifNode()) ??
      this.attempt(() => this.eachNode()) ??
      this.attempt(() => this.escape()) ??
      this.attempt(() => this.text()) ??
      (this.literal('\n') ? { kind: 'text', text: '\n' } : null)
    );
  }

  /** Runs a rule; on failure restores the position (PEG backtracking). */
  private attempt<T>(rule: () => T | null): T | null {
    const start = this.pos;
    const result = rule();
    if (result === null) this.pos = start;
    return result;
  }

  private variable(): TemplateNode | null {
    let open = 0;
    while (this.peek() === '{') {
      this.pos++;
      open++;
    }
    if (open < 2) return null;
    const path = this.selector();
    if (!path) return null;
    let close = 0;
    while (this.peek() === '}') {
      this.pos++;
      close++;
    }
    return close >= 2 ? { kind: 'variable', path } : null;
  }

  private selector(): Step[] | null {
    this.skipWhitespace();
    const steps: Step[] = [];
    const first = this.step();
    if (!first) return null;
    steps.push(first);
    for (;;) {
      const mark = this.pos;
      if (!this.literal('.')) break;
      const step = this.step();
      if (!step) {
        this.pos = mark;
        break;
      }
      steps.push(step);
    }
    this.skipWhitespace();
    return steps;
  }

  private step(): Step | null {
    const start = this.pos;
    if (NAME_CHAR.test(this.peek())) {
      while (NAME_CHAR.test(this.peek())) this.pos++;
      return { kind: 'name', name: this.src.slice(start, this.pos) };
    }
    while (this.pos - start < MAX_INDEX_DIGITS && DIGIT.test(this.peek())) this.pos++;
    if (this.pos === start) return null;
    return { kind: 'index', index: Number(this.src.slice(start, this.pos)) };
  }

  private open(): boolean {
    if (!this.literal('{%')) return false;
    this.skipWhitespace();
    return true;
  }

  private close(): boolean {
    this.skipWhitespace();
    if (!this.literal('%}')) return false;
    this.literal('\n');
    return true;
  }

  /** `{% <keyword> <selector> %}`. */
  private statement(keyword: string): Step[] | null {
    if (!this.open() || !this.literal(keyword)) return null;
    const blanks = this.pos;
    while (this.peek() === ' ' || this.peek() === '\t') this.pos++;
    if (this.pos === blanks) return null;
    const path = this.selector();
    if (!path || !this.close()) return null;
    return path;
  }

  /** `{% <keyword> %}` with nothing else inside. */
  private bare(keyword: string): boolean {
    return this.attempt(() => (this.open() && this.literal(keyword) && this.close() ? true : null)) ?? false;
  }

  private ifNode(): TemplateNode | null {
    const path = this.statement('if');
    if (!path) return null;
    const then = this.nodes();
    const otherwise = this.bare('else') ? this.nodes() : [];
    if (!this.bare('end')) return null;
    return { kind: 'if', path, then, else: otherwise };
  }

  private eachNode(): TemplateNode | null {
    const path = this.statement('each');
    if (!path) return null;
    const body = this.nodes();
    if (!this.bare('end')) return null;
    return { kind: 'each', path, body };
  }

  private escape(): TemplateNode | null {
    if (!this.literal('\\')) return null;
    if (this.literal('\n')) return { kind: 'text', text: '' };
    const text = this.text();
    return text ? { kind: 'text', text: `\\${text.text}` } : null;
  }

  private text(): { kind: 'text'; text: string } | null {
    const start = this.pos;
    for (;;) {
      const c = this.peek();
      if (c === '' || c === '\\' || c === '\n') break;
      if (c === '{') {
        const following = this.peek(1);
        if (following === '{' || following === '%') break;
      }
      this.pos++;
    }
    return this.pos > start ? { kind: 'text', text: this.src.slice(start, this.pos) } : null;
  }

  /** Parslet's wording for input left over: `Don't know what to do with "…" at line L char C.` */
  leftoverMessage(): string {
    const before = this.src.slice(0, this.pos);
    const line = before.split('\n').length;
    const column = this.pos - (before.lastIndexOf('\n') + 1) + 1;
    return `Don't know what to do with ${JSON.stringify(this.src.slice(this.pos, this.pos + 10))} at line ${line} char ${column}.`;
  }
}

/** GitLab's message when parsing a template takes too long; ours is linear but may nest too deep. */
export const PARSE_TIMEOUT_MESSAGE = 'Template parser timeout. Consider reducing the size of the template';

/** Parses a template, or throws ChangelogError `Failed to parse the template: …`. */
export function parseTemplate(source: string): TemplateNode[] {
  const parser = new Parser(source);
  let nodes: TemplateNode[];
  try {
    nodes = parser.nodes();
  } catch (error) {
    // Thousands of nested blocks exhaust the stack: as unusable as GitLab's timed-out parse.
    if (error instanceof RangeError) throw new ChangelogError(PARSE_TIMEOUT_MESSAGE);
    throw error;
  }
  if (parser.pos < source.length) throw new ChangelogError(PARSE_ERROR_PREFIX + parser.leftoverMessage());
  return nodes;
}
