// Stop strings over streamed text: text is released only once no stop string can still begin
// inside it, and generation ends before the first stop string.

export class StopStringFilter {
  private full = '';
  private released = 0;
  private readonly stops: string[];

  constructor(stops: readonly string[]) {
    this.stops = stops.filter((s) => s.length > 0);
  }

  /**
   * Adds generated text. Returns the text that is now safe to show and whether a stop string
   * was reached (the returned text then ends right before it).
   */
  push(piece: string): { text: string; stopped: boolean } {
    this.full += piece;
    // Search only where a new match can be: from the earliest unreleased position that a stop
    // string could overlap.
    let hit = -1;
    for (const s of this.stops) {
      const from = Math.max(0, this.released - s.length + 1);
      const i = this.full.indexOf(s, from);
      if (i >= 0 && (hit < 0 || i < hit)) hit = i;
    }
    if (hit >= 0) {
      const text = this.full.slice(this.released, Math.max(hit, this.released));
      this.released = Math.max(hit, this.released);
      this.full = this.full.slice(0, this.released);
      return { text, stopped: true };
    }
    const end = this.full.length - this.heldBack();
    const text = end > this.released ? this.full.slice(this.released, end) : '';
    if (end > this.released) this.released = end;
    return { text, stopped: false };
  }

  /** Everything not yet released (at the end of generation, when no stop string came). */
  flush(): string {
    const text = this.full.slice(this.released);
    this.released = this.full.length;
    return text;
  }

  /** The text released so far. */
  get text(): string {
    return this.full.slice(0, this.released);
  }

  /** Length of the longest tail of the text that is a proper prefix of some stop string. */
  private heldBack(): number {
    let hold = 0;
    for (const s of this.stops) {
      const max = Math.min(s.length - 1, this.full.length);
      for (let n = max; n > hold; n--) {
        if (this.full.endsWith(s.slice(0, n))) {
          hold = n;
          break;
        }
      }
    }
    return hold;
  }
}
