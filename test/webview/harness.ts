// Serves the webview pages outside VS Code: the same HTML builder, bundles, stylesheets and
// Content-Security-Policy as the extension, on 127.0.0.1. Extra: the acquireVsCodeApi shim,
// which records what the page posts in window.__posted, and a theme stylesheet
// (test/webview/themes/<theme>.css) with the --vscode-* variables VS Code would set.
import { randomBytes } from 'node:crypto';
import { createReadStream, existsSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { makeNonce, webviewPageHtml, type ViewName } from '../../webviews/shared/page';

const SHIM = `window.__posted = [];
window.acquireVsCodeApi = () => ({
  postMessage: (m) => { window.__posted.push(m); },
  getState: () => undefined,
  setState: () => {},
});`;

const TYPES: Record<string, string> = { '.js': 'text/javascript', '.css': 'text/css' };
const VIEWS: ViewName[] = ['plan', 'timeline', 'explain', 'whatif', 'layers'];
const THEMES_DIR = path.join(__dirname, 'themes');

export interface Harness { url: string; pageUrl(view: ViewName, theme?: 'dark' | 'light' | 'hc'): string; close(): Promise<void> }

/** Serves `/<view>?theme=…` pages, `/webviews/<file>` from `bundleDir` (dist/webviews) and `/themes/<theme>.css`. */
export async function startHarness(bundleDir: string): Promise<Harness> {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const view = (url.pathname === '/' ? 'layers' : url.pathname.slice(1)) as ViewName;
    if (VIEWS.includes(view)) {
      const theme = url.searchParams.get('theme');
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(webviewPageHtml({
        view, cspSource: origin, nonce: makeNonce(randomBytes),
        scriptUri: `${origin}/webviews/${view}.js`, styleUri: `${origin}/webviews/${view}.css`,
        ...(theme ? { extraStyleUris: [`${origin}/themes/${theme}.css`] } : {}),
        preludeScript: SHIM,
      }));
      return;
    }
    const dir = url.pathname.startsWith('/webviews/') ? bundleDir : url.pathname.startsWith('/themes/') ? THEMES_DIR : '';
    const file = dir ? path.join(dir, path.basename(url.pathname)) : '';
    if (!file || !existsSync(file)) { res.writeHead(404).end(); return; }
    res.writeHead(200, { 'content-type': TYPES[path.extname(file)] ?? 'application/octet-stream' });
    createReadStream(file).pipe(res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const base = `http://127.0.0.1:${port}`;
  return {
    url: `${base}/`,
    pageUrl: (view, theme) => `${base}/${view}${theme ? `?theme=${theme}` : ''}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** The Model Layers page at `/` (kept for the layers test). */
export const startLayersHarness = startHarness;
