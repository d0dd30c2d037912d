// Prints the native forward pass's logits (every position) for a GGUF model and a token list,
// as base64 of little-endian float32, so a test can run the native code in a child process
// under a different FULCRUM_ISA (the ISA is fixed when the addon loads).
// Usage: node --import tsx native-logits-cli.ts <model.gguf> <threads> <token,token,…>
import { readGguf } from '../../../engine/model/gguf';
import { readHparams } from '../../../engine/model/hparams';
import { createNativeModel, nativeKernels } from '../../../engine/native/model';
import { nativeConfig } from '../../../engine/runtime/engine';

const [modelPath, threadsArg, tokensArg] = process.argv.slice(2);
if (!modelPath || !threadsArg || !tokensArg) {
  process.stderr.write('usage: native-logits-cli.ts <model.gguf> <threads> <token,token,…>\n');
  process.exit(2);
}
const tokens = tokensArg.split(',').map(Number);
const file = readGguf(modelPath);
const hp = readHparams(file);
const tensors = file.tensors.map((t) => ({ name: t.name, type: t.type, dims: t.dims, offset: t.absOffset }));
const model = createNativeModel(modelPath, tensors, nativeConfig(file, hp, Math.max(tokens.length, 1), Number(threadsArg)));
try {
  const logits = model.eval(Int32Array.from(tokens), 0, true);
  process.stdout.write(JSON.stringify({ isa: nativeKernels().isaLevel(), logits: Buffer.from(logits.buffer, logits.byteOffset, logits.byteLength).toString('base64') }));
} finally {
  model.dispose();
}
