// The HTML shell of the Model Layers panel. The extension and the browser test harness both
// build the page here, so the harness exercises the same markup and Content-Security-Policy.

export interface LayersPageOptions {
  /** `webview.cspSource` in VS Code; the harness's origin in tests. */
  cspSource: string;
  /** A fresh random value per page load. */
  nonce: string;
  scriptUri: string;
  styleUri: string;
  /** Extra script run before the bundle (the harness's acquireVsCodeApi shim); gets the nonce. */
  preludeScript?: string;
}

export function layersPageHtml(o: LayersPageOptions): string {
  const csp = [
    "default-src 'none'",
    `script-src 'nonce-${o.nonce}'`,
    `style-src ${o.cspSource} 'nonce-${o.nonce}'`,
  ].join('; ');
  const prelude = o.preludeScript ? `\n  <script nonce="${o.nonce}">${o.preludeScript}</script>` : '';
  return `<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="UTF-8">
  <meta http-equiv="Content-Security-Policy" content="${csp}">
  <meta name="viewport" content="width=device-width, initial-scale=1.0">
  <link rel="stylesheet" href="${o.styleUri}" nonce="${o.nonce}">
  <title>Fulcrum: Model Layers</title>
</head>
<body>
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
