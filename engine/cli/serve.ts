// `fulcrum serve --lsp --stdio`: the engine as a language server on stdin/stdout.
import { ProposedFeatures, createConnection } from 'vscode-languageserver/node';
import { startServer } from '../server/server';
import { parseArgs, UsageError, type CliCommand } from './command';

const USAGE = `usage: fulcrum serve --lsp --stdio

Runs the engine as a language server (LSP 3.18 inline completions plus fulcrum/* requests)
speaking JSON-RPC on stdin/stdout. Model and threads come from the client's
initializationOptions {modelPath, threads} or a fulcrum/loadModel request.
`;

export const command: CliCommand = {
  async run(argv: string[]): Promise<number> {
    const args = parseArgs(argv, [], ['lsp', 'stdio', 'help']);
    if (args.options.has('help')) { process.stdout.write(USAGE); return 0; }
    if (args.positionals.length > 0) throw new UsageError(`serve: unexpected argument '${args.positionals[0]}'\n${USAGE}`);
    if (!args.options.has('lsp') || !args.options.has('stdio')) {
      throw new UsageError(`serve: only --lsp --stdio is available\n${USAGE}`);
    }
    startServer(createConnection(ProposedFeatures.all, process.stdin, process.stdout));
    // The connection keeps the process alive; it exits on the client's `exit` notification.
    return new Promise<number>(() => undefined);
  },
};
