// Entry of the engine's LSP server (bundled to dist/server.js). The transport comes from the
// command line, as vscode-languageserver reads it: --stdio, --node-ipc (the VS Code extension
// forks this file with TransportKind.ipc), --socket=<port> or --pipe=<name>.
import { ProposedFeatures, createConnection } from 'vscode-languageserver/node';
import { startServer } from './server';

const transports = ['--stdio', '--node-ipc', '--socket=', '--pipe='];
const args = process.argv.slice(2);
if (!args.some((a) => transports.some((t) => (t.endsWith('=') ? a.startsWith(t) : a === t)))) {
  process.stderr.write('usage: node dist/server.js --stdio | --node-ipc | --socket=<port> | --pipe=<name>\n');
  process.exit(2);
}
startServer(createConnection(ProposedFeatures.all));
