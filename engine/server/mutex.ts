// A FIFO lock: the engine holds one KV cache, so generation and model swaps take turns.

export class Mutex {
  private tail: Promise<void> = Promise.resolve();

  /** Resolves with the release function once every earlier holder has released. */
  lock(): Promise<() => void> {
    let release!: () => void;
    const mine = new Promise<void>((resolve) => { release = resolve; });
    const previous = this.tail;
    this.tail = previous.then(() => mine);
    return previous.then(() => release);
  }
}
