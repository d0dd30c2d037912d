// Recent completions by cursor context, with type-through: when the user types the first
// characters of a suggestion, the rest of it is still the suggestion (no new request). An LRU
// of `capacity` entries keyed by the document and the text around the cursor.

/** Characters of context on each side of the cursor that identify an entry. */
const KEY_CHARS = 1024;
/** Most characters typed into a suggestion that still find it. */
const MAX_TYPE_THROUGH = 256;

export const DEFAULT_CACHE_ENTRIES = 250;

export class CompletionCache {
  private readonly entries = new Map<string, string>();

  constructor(private readonly capacity = DEFAULT_CACHE_ENTRIES) {}

  get size(): number {
    return this.entries.size;
  }

  /**
   * The completion for the cursor between `before` and `after`: an entry stored here, or the
   * rest of an entry stored up to MAX_TYPE_THROUGH characters earlier whose beginning the user
   * has since typed. undefined when none fits.
   */
  lookup(document: string, before: string, after: string): string | undefined {
    const limit = Math.min(MAX_TYPE_THROUGH, before.length);
    for (let typed = 0; typed <= limit; typed++) {
      const key = keyOf(document, before.slice(0, before.length - typed), after);
      const entry = this.entries.get(key);
      if (entry === undefined) continue;
      const typedText = before.slice(before.length - typed);
      if (!entry.startsWith(typedText)) continue;
      const rest = entry.slice(typed);
      if (rest.length === 0) continue;
      this.touch(key, entry);
      return rest;
    }
    return undefined;
  }

  store(document: string, before: string, after: string, completion: string): void {
    if (completion.length === 0) return;
    this.touch(keyOf(document, before, after), completion);
  }

  clear(): void {
    this.entries.clear();
  }

  private touch(key: string, value: string): void {
    this.entries.delete(key);
    this.entries.set(key, value);
    while (this.entries.size > this.capacity) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
  }
}

function keyOf(document: string, before: string, after: string): string {
  return `${document}\u0000${before.length}\u0000${before.slice(-KEY_CHARS)}\u0000${after.slice(0, KEY_CHARS)}`;
}
