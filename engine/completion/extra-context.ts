// Extra context from other files: a ring of chunks (up to 64 lines around where the user was
// last working in each recently used document), as llama.vscode keeps. Completions in one file
// put the chunks of the others before the FIM prefix, within the prompt budget. A chunk that
// mostly repeats one already in the ring replaces it, so one busy file does not fill the ring.

export interface ContextChunk {
  /** The document the chunk comes from (its URI or path), shown to models that know file names. */
  name: string;
  text: string;
}

export const CHUNK_LINES = 64;
export const RING_CHUNKS = 16;
/** Chunks whose line sets overlap more than this (Jaccard) are the same chunk. */
const SAME_CHUNK = 0.5;

export class ChunkRing {
  private chunks: Array<ContextChunk & { lines: Set<string> }> = [];

  constructor(private readonly capacity = RING_CHUNKS, private readonly chunkLines = CHUNK_LINES) {}

  /** Records the lines around `line` of `document` (named `name`) as the newest chunk. */
  note(name: string, document: string, line: number): void {
    const all = document.split('\n');
    const start = Math.max(0, Math.min(line - Math.floor(this.chunkLines / 2), all.length - this.chunkLines));
    const lines = all.slice(start, start + this.chunkLines);
    const text = lines.join('\n');
    if (text.trim().length === 0) return;
    const set = new Set(lines.map((l) => l.trim()).filter((l) => l.length > 0));
    this.chunks = this.chunks.filter((c) => !(c.name === name && jaccard(c.lines, set) > SAME_CHUNK));
    this.chunks.push({ name, text, lines: set });
    if (this.chunks.length > this.capacity) this.chunks.splice(0, this.chunks.length - this.capacity);
  }

  /** Forgets a document's chunks (closed or deleted). */
  forget(name: string): void {
    this.chunks = this.chunks.filter((c) => c.name !== name);
  }

  /** Chunks from documents other than `name`, oldest first (so the prompt's start stays put). */
  chunksFor(name: string): ContextChunk[] {
    return this.chunks.filter((c) => c.name !== name).map(({ name: n, text }) => ({ name: n, text }));
  }
}

function jaccard(a: Set<string>, b: Set<string>): number {
  if (a.size === 0 && b.size === 0) return 1;
  let common = 0;
  for (const x of a) if (b.has(x)) common++;
  return common / (a.size + b.size - common);
}
