/**
 * Evaluates a parsed changelog template against data (lib/gitlab/template_parser/ast.rb and
 * eval_state.rb): maps, arrays, strings, numbers, booleans and null.
 */
import { ChangelogError } from '../errors.js';
import type { Step, TemplateNode } from './ast.js';

/** GitLab allows four nested `each` blocks; entering a fifth is an error, even for an empty list. */
export const MAX_LOOP_DEPTH = 4;
export const LOOP_DEPTH_MESSAGE = `You can only nest up to ${MAX_LOOP_DEPTH} loops`;

export type TemplateValue =
  | string
  | number
  | boolean
  | null
  | undefined
  | TemplateValue[]
  | { [key: string]: TemplateValue };

const isMap = (value: TemplateValue): value is { [key: string]: TemplateValue } =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Follows a dotted path from `current`: `it` is the value itself, names read maps, indexes read arrays. */
function resolve(current: TemplateValue, path: Step[]): TemplateValue {
  let value: TemplateValue = current;
  for (const step of path) {
    if (value === null || value === undefined) return null;
    if (step.kind === 'name') {
      if (step.name === 'it') continue;
      value = isMap(value) && Object.hasOwn(value, step.name) ? value[step.name] : null;
    } else {
      value = Array.isArray(value) ? (value[step.index] ?? null) : null;
    }
  }
  return value ?? null;
}

/** GitLab's truthiness: empty strings, arrays and maps are false, and so are null and false. */
export function isTruthy(value: TemplateValue): boolean {
  if (value === null || value === undefined || value === false) return false;
  if (typeof value === 'string' || Array.isArray(value)) return value.length > 0;
  if (isMap(value)) return Object.keys(value).length > 0;
  return true;
}

/** Ruby's `inspect`, which `to_s` of arrays and hashes falls back to. */
function inspect(value: TemplateValue): string {
  if (value === null || value === undefined) return 'nil';
  if (typeof value === 'string') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(inspect).join(', ')}]`;
  if (isMap(value)) {
    return `{${Object.entries(value)
      .map(([k, v]) => `${JSON.stringify(k)} => ${inspect(v)}`)
      .join(', ')}}`;
  }
  return String(value);
}

function print(value: TemplateValue): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'string') return value;
  if (Array.isArray(value) || isMap(value)) return inspect(value);
  return String(value);
}

function evaluate(nodes: TemplateNode[], current: TemplateValue, depth: number, out: string[]): void {
  for (const node of nodes) {
    switch (node.kind) {
      case 'text':
        out.push(node.text);
        break;
      case 'variable':
        out.push(print(resolve(current, node.path)));
        break;
      case 'if':
        evaluate(isTruthy(resolve(current, node.path)) ? node.then : node.else, current, depth, out);
        break;
      case 'each': {
        if (depth >= MAX_LOOP_DEPTH) throw new ChangelogError(LOOP_DEPTH_MESSAGE);
        const collection = resolve(current, node.path);
        // Inside the loop only the element is in scope; maps iterate as [key, value] pairs.
        const items: TemplateValue[] = Array.isArray(collection)
          ? collection
          : isMap(collection)
            ? Object.entries(collection)
            : [];
        for (const item of items) evaluate(node.body, item, depth + 1, out);
        break;
      }
    }
  }
}

/** Renders parsed template nodes; throws ChangelogError past the loop nesting limit. */
export function renderTemplate(nodes: TemplateNode[], data: TemplateValue): string {
  const out: string[] = [];
  evaluate(nodes, data, 0, out);
  return out.join('');
}
