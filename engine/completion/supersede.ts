// The supersede rule for completions: a new completion request aborts the one running (after
// a keystroke the older context is stale, so finishing it wastes the engine), and the client's
// own cancellation aborts its request. Each abort carries the reason its request reports.

/** Why a completion was aborted; becomes the message of its cancelled response. */
export class CompletionAborted extends Error {}

export class LatestCompletionWins {
  private active: AbortController | undefined;

  /**
   * Starts a completion: aborts the running one, and links the client's `signal`. Call `end`
   * when the completion is over, whatever its outcome.
   */
  begin(signal: AbortSignal): { signal: AbortSignal; end: () => void } {
    this.active?.abort(new CompletionAborted('cancelled: superseded by a newer completion request'));
    const mine = new AbortController();
    this.active = mine;
    const onCancel = () => mine.abort(new CompletionAborted('cancelled by the client ($/cancelRequest)'));
    if (signal.aborted) onCancel(); else signal.addEventListener('abort', onCancel, { once: true });
    return {
      signal: mine.signal,
      end: () => {
        signal.removeEventListener('abort', onCancel);
        if (this.active === mine) this.active = undefined;
      },
    };
  }

  /** Aborts the running completion (a model load or shutdown). */
  abort(reason: string): void {
    this.active?.abort(new CompletionAborted(reason));
  }
}

/** The message of an aborted signal's reason. */
export function abortMessage(signal: AbortSignal): string {
  const reason: unknown = signal.reason;
  return reason instanceof CompletionAborted ? reason.message : 'cancelled';
}
