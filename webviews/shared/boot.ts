// The common start of every webview bundle: receive { type: 'data' | 'status' | 'error' }
// messages, draw them, and say 'ready' once the listener is in place (so nothing sent before is lost).
import { renderStatus } from './dom';
import { isToView, type FromView } from './messages';

const api = acquireVsCodeApi();

export function post(message: FromView): void {
  api.postMessage(message);
}

export function startView<T>(render: (root: HTMLElement, data: T) => void): void {
  const root = document.getElementById('app');
  window.addEventListener('message', (event: MessageEvent<unknown>) => {
    if (!root || !isToView(event.data)) return;
    const m = event.data;
    if (m.type === 'data') render(root, m.data as T);
    else renderStatus(root, m.message, m.type === 'error');
  });
  post({ type: 'ready' });
}
