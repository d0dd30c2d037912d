// Serves a webview page outside VS Code: the same HTML builder, bundle, stylesheet and
// Content-Security-Policy as the extension, on 127.0.0.1. Only the acquireVsCodeApi shim is
// extra: it records what the page posts in window.__posted, where the test reads it.
import { randomBytes } from 'node:crypto';
import { createReadStream, existsSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { layersPageHtml, makeNonce } from '../../webviews/layers/page';

const SHIM = `window.__posted = [];
window.acquireVsCodeApi = () => ({
  postMessage: (m) => { window.__posted.push(m); },
  getState: () => undefined,
  setState: () => {},
});`;

const TYPES: Record<string, string> = { '.js': 'text/javascript', '.css': 'text/css' };

export interface Harness { url: string; close(): Promise<void> }

/** Serves `/` (the Model Layers page) and `/webviews/<file>` from `bundleDir` (dist/webviews). */
export async function startLayersHarness(bundleDir: string): Promise<Harness> {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (url.pathname === '/') {
      const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(layersPageHtml({
        cspSource: origin,
        nonce: makeNonce(randomBytes),
        scriptUri: `${origin}/webviews/layers.js`,
        styleUri: `${origin}/webviews/layers.css`,
        preludeScript: SHIM,
      }));
      return;
    }
    const name = url.pathname.startsWith('/webviews/') ? path.basename(url.pathname) : '';
    const file = path.join(bundleDir, name);
    if (!name || !existsSync(file)) { res.writeHead(404).end(); return; }
    res.writeHead(200, { 'content-type': TYPES[path.extname(file)] ?? 'application/octet-stream' });
    createReadStream(file).pipe(res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
