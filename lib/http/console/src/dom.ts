/** Element builders: children are always text (never HTML), nodes, nested arrays, or skipped. */

export type Child = Node | string | number | null | undefined | false | readonly Child[];
export type AttrValue = string | number | boolean | null | undefined | ((e: Event) => unknown);
export type Attrs = Readonly<Record<string, AttrValue>>;

function appendAll(el: Element, children: readonly Child[]): void {
  for (const c of children) {
    if (Array.isArray(c)) appendAll(el, c as readonly Child[]);
    else if (c === null || c === undefined || c === false) continue;
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** An HTML element: `on…` attributes become listeners, `class` the class name, `true` an empty attribute. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs | null, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on')) {
      if (typeof v === 'function') el.addEventListener(k.slice(2), v);
    } else if (typeof v === 'function') continue;
    else if (k === 'class') el.className = String(v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  appendAll(el, children);
  return el;
}

const SVG = 'http://www.w3.org/2000/svg';

/** An SVG element; every attribute is set as it is. */
export function s<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attrs: Readonly<Record<string, string | number | null | undefined>> | null,
  ...children: Child[]
): SVGElementTagNameMap[K] {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs ?? {})) if (v !== null && v !== undefined) el.setAttribute(k, String(v));
  appendAll(el, children);
  return el;
}

/** A page element index.html provides. */
export function byId<T extends HTMLElement>(id: string): T {
  const el = document.getElementById(id);
  if (!el) throw new Error(`index.html lacks #${id}`);
  return el as T;
}
