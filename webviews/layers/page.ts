// The HTML shell of the Model Layers panel: the shared webview page (webviews/shared/page.ts).
import { makeNonce, webviewPageHtml } from '../shared/page';

export interface LayersPageOptions {
  cspSource: string;
  nonce: string;
  scriptUri: string;
  styleUri: string;
  preludeScript?: string;
}

export function layersPageHtml(o: LayersPageOptions): string {
  return webviewPageHtml({ view: 'layers', ...o });
}

export { makeNonce };
