// The HTML shell of every Fulcrum webview. The extension's panel host and the browser test
// harness both build pages here, so tests exercise the same markup and Content-Security-Policy:
// no inline script or style, scripts only with this page's nonce, styles only from the bundle.

export type ViewName = 'plan' | 'timeline' | 'explain' | 'whatif' | 'layers';

export const VIEW_TITLES: Record<ViewName, string> = {
  plan: 'Fulcrum: Offload Plan',
  timeline: 'Fulcrum: Timeline',
  explain: 'Fulcrum: Explain Decision',
  whatif: 'Fulcrum: What-If',
  layers: 'Fulcrum: Model Layers',
};

export interface PageOptions {
  view: ViewName;
  /** `webview.cspSource` in VS Code; the harness's origin in tests. */
  cspSource: string;
  /** A fresh random value per page load. */
  nonce: string;
  scriptUri: string;
  styleUri: string;
  /** Extra stylesheets from cspSource (the test harness's theme files). */
  extraStyleUris?: string[];
  /** Extra script run before the bundle (the harness's acquireVsCodeApi shim); gets the nonce. */
  preludeScript?: string;
}

export function contentSecurityPolicy(cspSource: string, nonce: string): string {
  return [
    "default-src 'none'",
    `script-src 'nonce-${nonce}'`,
    `style-src ${cspSource} 'nonce-${nonce}'`,
    `img-src ${cspSource} data:`,
  ].join('; ');
}

export function webviewPageHtml(o: PageOptions): string {
  const prelude = o.preludeScript ? `\n  <script nonce="${o.nonce}">${o.preludeScript}</script>` : '';
  const styles = [o.styleUri, ...(o.extraStyleUris ?? [])]
    .map((href) => `<link rel="stylesheet" href="${href}" nonce="${o.nonce}">`).join('\n  ');
  return `<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="UTF-8">
  <meta http-equiv="Content-Security-Policy" content="${contentSecurityPolicy(o.cspSource, o.nonce)}">
  <meta name="viewport" content="width=device-width, initial-scale=1.0">
  ${styles}
  <title>${VIEW_TITLES[o.view]}</title>
</head>
<body data-view="${o.view}">
  <main id="app" aria-live="polite">
    <p id="status" class="status">Waiting for the engine…</p>
  </main>${prelude}
  <script nonce="${o.nonce}" src="${o.scriptUri}"></script>
</body>
</html>`;
}

/** 128 random bits, base64: a CSP nonce. */
export function makeNonce(randomBytes: (n: number) => Uint8Array): string {
  return Buffer.from(randomBytes(16)).toString('base64');
}
