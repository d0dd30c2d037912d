// When to restart the engine after it exits unexpectedly: with exponential back-off, and not at
// all after too many exits in a short window (a model that crashes the engine at load would
// otherwise restart forever).

export type RestartDecision = { restart: true; delayMs: number; attempt: number } | { restart: false; crashes: number };

export class RestartPolicy {
  private crashTimes: number[] = [];

  constructor(
    readonly maxCrashes = 5,
    readonly windowMs = 3 * 60_000,
    readonly baseDelayMs = 500,
    readonly maxDelayMs = 30_000,
  ) {}

  /** Records an exit at `now` and decides what to do. */
  onCrash(now: number): RestartDecision {
    this.crashTimes = this.crashTimes.filter((t) => now - t < this.windowMs);
    this.crashTimes.push(now);
    const crashes = this.crashTimes.length;
    if (crashes >= this.maxCrashes) return { restart: false, crashes };
    return { restart: true, attempt: crashes, delayMs: Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** (crashes - 1)) };
  }

  /** A manual restart starts counting afresh. */
  reset(): void {
    this.crashTimes = [];
  }
}
