// Chat prompts for /v1/chat/completions: the GGUF's own chat template (`tokenizer.chat_template`,
// a Jinja template as Hugging Face tokenizers ship it) rendered by @huggingface/jinja, the
// template engine transformers.js uses, rather than a hand-written one. A model without a
// template gets ChatML (Qwen's and many fine-tunes' format), and the server says so in its log.
import { Template } from '@huggingface/jinja';
import type { Tokenizer } from '../../model/tokenizer';
import { RequestError } from './openai';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
}

/** ChatML, used when the GGUF carries no template. */
export const CHATML_TEMPLATE = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

export class ChatFormatter {
  private readonly template: Template;
  /** 'gguf' when the model's own template renders the prompt, 'chatml' when the default does. */
  readonly source: 'gguf' | 'chatml';
  private readonly bosText: string;
  private readonly eosText: string;

  constructor(private readonly tokenizer: Tokenizer, ggufTemplate: string | undefined) {
    this.source = ggufTemplate ? 'gguf' : 'chatml';
    try {
      this.template = new Template(ggufTemplate ?? CHATML_TEMPLATE);
    } catch (e) {
      throw new Error(`the model's tokenizer.chat_template does not parse as Jinja: ${(e as Error).message}`);
    }
    this.bosText = tokenizer.bos !== undefined ? tokenizer.tokenText(tokenizer.bos) : '';
    this.eosText = tokenizer.eos !== undefined ? tokenizer.tokenText(tokenizer.eos) : '';
  }

  /** Tokens that end an assistant turn besides end-of-generation (ChatML's <|im_end|> when it is one token). */
  stopIds(): Set<number> {
    const ids = new Set<number>();
    for (const t of ['<|im_end|>', '<|eot_id|>', '<end_of_turn>', '<|end|>']) {
      const id = this.tokenizer.tokenId(t);
      if (id !== undefined) ids.add(id);
    }
    return ids;
  }

  /** Stop strings for templates whose end-of-turn marker is not a single token in this vocabulary. */
  stopStrings(): string[] {
    return this.source === 'chatml' && this.tokenizer.tokenId('<|im_end|>') === undefined ? ['<|im_end|>', '<|im_start|>'] : [];
  }

  /**
   * The prompt's token ids. Special-token text in the rendered template is parsed as special
   * tokens (as llama.cpp does); BOS is added by the tokenizer only when the template did not
   * already write it.
   */
  render(messages: ChatMessage[]): number[] {
    let text: string;
    try {
      text = this.template.render({ messages, add_generation_prompt: true, bos_token: this.bosText, eos_token: this.eosText });
    } catch (e) {
      throw new RequestError(400, `the chat template cannot render these messages: ${(e as Error).message}`, 'invalid_request_error');
    }
    const templateWroteBos = this.bosText !== '' && text.startsWith(this.bosText);
    return this.tokenizer.encode(text, { addBos: this.tokenizer.addBos && !templateWroteBos, parseSpecial: true });
  }
}

const ROLES = new Set(['system', 'user', 'assistant', 'tool', 'developer']);

/** `messages` of a chat request: roles and string (or text-part) contents, each checked with its index. */
export function parseMessages(v: unknown): ChatMessage[] {
  const bad = (m: string) => new RequestError(400, m, 'invalid_request_error');
  if (!Array.isArray(v) || v.length === 0) throw bad(`'messages' is required and must be a non-empty array`);
  if (v.length > 1024) throw bad(`'messages' holds ${v.length} messages; at most 1024`);
  return v.map((m, i) => {
    if (typeof m !== 'object' || m === null) throw bad(`'messages[${i}]' must be an object {role, content}`);
    const { role, content } = m as { role?: unknown; content?: unknown };
    if (typeof role !== 'string' || !ROLES.has(role)) throw bad(`'messages[${i}].role' must be one of system, user, assistant, tool, developer`);
    let text: string;
    if (typeof content === 'string') text = content;
    else if (content === null && role === 'assistant') text = '';
    else if (Array.isArray(content) && content.every((p) => typeof p === 'object' && p !== null && (p as { type?: unknown }).type === 'text' && typeof (p as { text?: unknown }).text === 'string')) {
      text = content.map((p) => (p as { text: string }).text).join('');
    } else throw bad(`'messages[${i}].content' must be a string or an array of {type: "text", text} parts (images and audio are not supported)`);
    // 'developer' is OpenAI's newer name for 'system'; templates know 'system'.
    return { role: (role === 'developer' ? 'system' : role) as ChatMessage['role'], content: text };
  });
}
