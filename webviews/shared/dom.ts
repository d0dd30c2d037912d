// DOM helpers for the webviews. Only attributes and CSS classes are set, never inline styles,
// so the strict Content-Security-Policy holds.
const SVG_NS = 'http://www.w3.org/2000/svg';

export function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string> = {}, text?: string): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

export function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number> = {}, text?: string): SVGElementTagNameMap[K] {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

export function renderStatus(root: HTMLElement, message: string, isError: boolean): void {
  root.replaceChildren(el('p', { id: 'status', class: isError ? 'status error' : 'status', role: isError ? 'alert' : 'status' }, message));
}
