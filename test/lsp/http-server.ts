// A real `fulcrum serve --http` process for the tests, and a real HTTP client (node's fetch and
// raw sockets for the abuse cases). Only 127.0.0.1.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../helpers/shared';

export class HttpServerProcess {
  private constructor(readonly child: ChildProcessWithoutNullStreams, readonly base: string, readonly token: string | undefined, public stderr: string) {}

  static async start(model: string, extra: string[] = []): Promise<HttpServerProcess> {
    const child = spawn(process.execPath, [path.join(repoRoot, 'dist', 'cli.js'), 'serve', '--http', '--port', '0', '--model', model, ...extra], { stdio: 'pipe' });
    let out = '';
    let err = '';
    child.stderr.on('data', (b: Buffer) => { err += b.toString(); });
    const base = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`server did not start in 30 s: ${err}`)), 30_000);
      child.stdout.on('data', (b: Buffer) => {
        out += b.toString();
        const m = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
        if (m && /fulcrum: (token \S+|no authentication)/.test(out)) { clearTimeout(timer); resolve(m[1]!); }
      });
      child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`server exited (${code}): ${err}`)); });
    });
    const token = /fulcrum: token (\S+)/.exec(out)?.[1];
    const p = new HttpServerProcess(child, base, token, err);
    child.stderr.on('data', (b: Buffer) => { p.stderr += b.toString(); });
    return p;
  }

  headers(): Record<string, string> {
    return new HttpApiClient(this.base, this.token).headers();
  }

  stream(prompt: string, maxTokens: number, cancelAt?: (n: number) => boolean): ReturnType<HttpApiClient['stream']> {
    return new HttpApiClient(this.base, this.token).stream(prompt, maxTokens, cancelAt);
  }

  rssBytes(): number {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${this.child.pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((r) => this.child.once('exit', r));
    this.child.kill('SIGTERM');
    await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
    if (this.child.exitCode === null) this.child.kill('SIGKILL');
  }
}

/** A client of Fulcrum's HTTP API at `base` (a `fulcrum serve --http` process, or the editor engine's own server). */
export class HttpApiClient {
  constructor(readonly base: string, readonly token: string | undefined) {}

  headers(): Record<string, string> {
    return { 'content-type': 'application/json', ...(this.token ? { authorization: `Bearer ${this.token}` } : {}) };
  }

  /**
   * Streams a completion; returns the concatenated text and the finish reason. `cancelAt(n)`
   * returning true after the n-th piece cancels the stream the way a client that goes away does:
   * the body is cancelled, which closes the connection (then `cancelled` is true).
   */
  async stream(prompt: string, maxTokens: number, cancelAt?: (n: number) => boolean): Promise<{ text: string; finish: string | null; done: boolean; cancelled: boolean }> {
    // No request may hang a test: 30 s is far beyond any stream here.
    const res = await fetch(`${this.base}/v1/completions`, { method: 'POST', headers: this.headers(), body: JSON.stringify({ prompt, max_tokens: maxTokens, temperature: 0, stream: true }), signal: AbortSignal.timeout(30_000) });
    if (res.status !== 200) throw new Error(`status ${res.status}: ${await res.text()}`);
    const reader = res.body!.getReader();
    const dec = new TextDecoder();
    let buf = '', text = '', finish: string | null = null, done = false, pieces = 0;
    for (;;) {
      const { value, done: end } = await reader.read();
      if (end) break;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const ev = buf.slice(0, i);
        buf = buf.slice(i + 2);
        if (!ev.startsWith('data: ')) continue;
        const data = ev.slice(6);
        if (data === '[DONE]') { done = true; continue; }
        const j = JSON.parse(data) as { choices: { text: string; finish_reason: string | null }[] };
        text += j.choices[0]!.text;
        if (j.choices[0]!.finish_reason) finish = j.choices[0]!.finish_reason;
        if (cancelAt?.(++pieces)) {
          await reader.cancel();
          return { text, finish, done, cancelled: true };
        }
      }
    }
    return { text, finish, done, cancelled: false };
  }

}
