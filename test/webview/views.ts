// Shared steps of the webview tests: open a view in the harness under a theme, post it data,
// collect CSP violations, and take screenshots into test-artifacts/screenshots/.
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import type { ViewName } from '../../webviews/shared/page';
import { SCREENSHOTS } from './browser';
import type { Harness } from './harness';

export interface OpenView { page: Page; cspViolations: string[]; pageErrors: string[] }

export async function openView(browser: Browser, harness: Harness, view: ViewName, theme: 'dark' | 'light' | 'hc', width = 1000, height = 800): Promise<OpenView> {
  const page = await (await browser.newContext({ viewport: { width, height } })).newPage();
  const cspViolations: string[] = [];
  const pageErrors: string[] = [];
  page.on('console', (m) => { if (/Content Security Policy/i.test(m.text())) cspViolations.push(m.text()); });
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.goto(harness.pageUrl(view, theme));
  await page.waitForFunction(() => (window as unknown as { __posted: { type: string }[] }).__posted.some((m) => m.type === 'ready'));
  return { page, cspViolations, pageErrors };
}

export async function postData(page: Page, data: unknown): Promise<void> {
  await page.evaluate((m) => window.postMessage(m, '*'), { type: 'data', data });
}

export async function screenshot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

/** Tries an inline script and an inline style; the page's CSP must block both. */
export async function cspBlocksInline(page: Page): Promise<{ scriptRan: boolean; styleApplied: boolean; violations: number }> {
  return page.evaluate(async () => {
    const w = window as unknown as { __inlineRan?: boolean };
    let violations = 0;
    document.addEventListener('securitypolicyviolation', () => { violations++; });
    const s = document.createElement('script');
    s.textContent = 'window.__inlineRan = true;';
    document.body.append(s);
    const st = document.createElement('style');
    st.textContent = 'body { outline: 7px solid rgb(1, 2, 3) !important; }';
    document.head.append(st);
    await new Promise((r) => setTimeout(r, 100));
    const styleApplied = getComputedStyle(document.body).outlineWidth === '7px';
    return { scriptRan: w.__inlineRan === true, styleApplied, violations };
  });
}

/** Elements one can Tab to that have no accessible name (aria-label, text or title). */
export async function unnamedFocusables(page: Page): Promise<string[]> {
  return page.evaluate(() => Array.from(document.querySelectorAll<HTMLElement | SVGElement>('[tabindex="0"], button, select, input, a[href]'))
    .filter((n) => !(n.getAttribute('aria-label') || n.textContent?.trim() || n.getAttribute('title') || (n.id && document.querySelector(`label[for="${n.id}"]`))))
    .map((n) => n.outerHTML.slice(0, 80)));
}

/** WCAG contrast ratio of two #rrggbb colours. */
export function contrastRatio(a: string, b: string): number {
  const lum = (hex: string) => {
    const [r, g, bl] = [1, 3, 5].map((i) => {
      const c = parseInt(hex.slice(i, i + 2), 16) / 255;
      return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r! + 0.7152 * g! + 0.0722 * bl!;
  };
  const [l1, l2] = [lum(a), lum(b)].sort((x, y) => y - x);
  return (l1! + 0.05) / (l2! + 0.05);
}
