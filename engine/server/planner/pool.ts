// Runs planner jobs on one worker thread, one at a time, in arrival order. A job whose request is
// cancelled is dropped if it has not started; if it is running, the worker is terminated (the
// planner cannot be interrupted otherwise) and a fresh one serves the next job. Jobs that name
// a `supersedes` group (what-if re-plans) cancel every older job of the same group.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { PlannerJob, PlannerMethod, PlannerReply } from './messages';
import type { PlanParams } from '../../plan/api';

export class PlannerCancelledError extends Error {
  constructor(reason: string) { super(reason); this.name = 'PlannerCancelledError'; }
}

interface Pending {
  job: PlannerJob;
  group: string | undefined;
  resolve(value: unknown): void;
  reject(err: Error): void;
}

/**
 * The worker: dist/plan-worker.js beside the bundled server; else the TypeScript source through
 * tsx's CommonJS hook (the LSP tests run the server from source, and a worker does not inherit
 * the main thread's --import loader).
 */
function startWorker(): Worker {
  const bundled = path.join(__dirname, 'plan-worker.js');
  if (existsSync(bundled)) return new Worker(bundled);
  const source = path.join(__dirname, 'plan-worker.ts');
  if (existsSync(source)) return new Worker(`require('tsx/cjs'); require(${JSON.stringify(source)});`, { eval: true });
  throw new Error(`planner worker not found: neither ${bundled} nor ${source} exists (run npm run build)`);
}

export class PlannerPool {
  private worker: Worker | undefined;
  private running: Pending | undefined;
  private readonly queue: Pending[] = [];
  private nextId = 1;
  /** Wall time of the last finished job inside the worker, ms (for logs and tests). */
  lastJobMs = 0;

  run(method: PlannerMethod, params: PlanParams, options: { supersedes?: string; onCancel?: (cancel: () => void) => void } = {}): Promise<unknown> {
    const group = options.supersedes;
    if (group !== undefined) this.cancelGroup(group, 'superseded by a newer request of the same kind');
    return new Promise((resolve, reject) => {
      const pending: Pending = { job: { id: this.nextId++, method, params }, group, resolve, reject };
      this.queue.push(pending);
      options.onCancel?.(() => this.cancel(pending, 'cancelled by the client'));
      this.pump();
    });
  }

  dispose(): void {
    for (const p of this.queue.splice(0)) p.reject(new PlannerCancelledError('the server is shutting down'));
    this.running?.reject(new PlannerCancelledError('the server is shutting down'));
    this.running = undefined;
    void this.worker?.terminate();
    this.worker = undefined;
  }

  private cancelGroup(group: string, reason: string): void {
    for (const p of [...this.queue, ...(this.running ? [this.running] : [])]) if (p.group === group) this.cancel(p, reason);
  }

  private cancel(p: Pending, reason: string): void {
    const queued = this.queue.indexOf(p);
    if (queued >= 0) {
      this.queue.splice(queued, 1);
      p.reject(new PlannerCancelledError(reason));
      return;
    }
    if (this.running === p) {
      this.running = undefined;
      p.reject(new PlannerCancelledError(reason));
      void this.worker?.terminate();
      this.worker = undefined;
      this.pump();
    }
  }

  private ensureWorker(): Worker {
    if (this.worker) return this.worker;
    const worker = startWorker();
    worker.on('message', (reply: PlannerReply) => {
      const p = this.running;
      if (!p || p.job.id !== reply.id || worker !== this.worker) return;
      this.running = undefined;
      if (reply.ok) { this.lastJobMs = reply.ms; p.resolve(reply.result); } else p.reject(new Error(reply.message));
      this.pump();
    });
    const fail = (err: Error): void => {
      if (worker !== this.worker) return;
      this.worker = undefined;
      const p = this.running;
      this.running = undefined;
      p?.reject(new Error(`planner worker failed: ${err.message}`));
      this.pump();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => { if (worker === this.worker) fail(new Error(`exited with code ${code}`)); });
    // The worker must not keep the server alive on its own.
    worker.unref();
    this.worker = worker;
    return worker;
  }

  private pump(): void {
    if (this.running || this.queue.length === 0) return;
    const next = this.queue.shift()!;
    this.running = next;
    this.ensureWorker().postMessage(next.job);
  }
}
