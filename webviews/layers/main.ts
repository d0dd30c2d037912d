// Entry of the Model Layers webview (bundled to dist/webviews/layers.js). Data arrives by
// postMessage from the extension, which asks the engine with fulcrum/layers.
import './layers.css';
import type { ToLayersView } from './messages';
import { renderLayers, renderStatus } from './render';

const vscode = acquireVsCodeApi();
const root = document.getElementById('app');

function isMessage(value: unknown): value is ToLayersView {
  return typeof value === 'object' && value !== null && typeof (value as { type?: unknown }).type === 'string';
}

window.addEventListener('message', (event: MessageEvent<unknown>) => {
  if (!root || !isMessage(event.data)) return;
  const message = event.data;
  switch (message.type) {
    case 'layers': renderLayers(root, message); break;
    case 'status': renderStatus(root, message.message, false); break;
    case 'error': renderStatus(root, message.message, true); break;
  }
});

// Ask for data only once the listener is in place, so nothing sent before is lost.
vscode.postMessage({ type: 'ready' });
