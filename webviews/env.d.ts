// Ambient declarations for webview bundles: esbuild turns `import './x.css'` into a CSS file
// next to the bundle; VS Code injects acquireVsCodeApi() into webviews.
declare module '*.css';

interface VsCodeWebviewApi {
  postMessage(message: unknown): void;
  getState(): unknown;
  setState(state: unknown): void;
}

declare function acquireVsCodeApi(): VsCodeWebviewApi;
