// Child of argmax.test.ts: greedyPick (the native argmaxFinite at this process's FULCRUM_ISA)
// against the JS argmax on rows of several lengths (vector bodies and scalar tails), ties, maxima
// in the tail, signed zeros, and rows with NaN or ±Inf, which must throw naming the position.
import { nativeKernels } from '../../engine/native/model';
import { argmax, greedyPick, NonFiniteLogitsError } from '../../engine/runtime/sampler';
import { seededRandom } from '../../engine/model/seeded-random';

const rand = seededRandom(7);
const failures: string[] = [];
let cases = 0;
for (const n of [1, 2, 7, 8, 15, 16, 17, 31, 32, 33, 47, 100, 1000, 151936]) {
  for (const kind of ['random', 'ties', 'last', 'zeros', 'negative'] as const) {
    const x = new Float32Array(n);
    for (let i = 0; i < n; i++) x[i] = kind === 'zeros' ? (i % 2 ? 0 : -0) : kind === 'negative' ? -1 - rand() * 100 : (rand() - 0.5) * 20;
    if (kind === 'ties' && n > 2) { x[Math.floor(n / 3)] = 50; x[n - 1] = 50; x[Math.floor(n / 2)] = 50; }
    if (kind === 'last') x[n - 1] = 1e30;
    cases++;
    const want = argmax(x), got = greedyPick(x, 0);
    if (want !== got) failures.push(`n=${n} ${kind}: ${got}, JS argmax ${want}`);
  }
  for (const bad of [NaN, Infinity, -Infinity]) {
    for (const at of [0, n - 1, Math.floor(n / 2)]) {
      const x = new Float32Array(n).fill(1);
      x[at] = bad;
      cases++;
      if (nativeKernels().argmaxFinite(x) !== -1) failures.push(`n=${n}: ${bad} at ${at} not reported`);
      try {
        greedyPick(x, 42);
        failures.push(`n=${n}: greedyPick did not throw for ${bad} at ${at}`);
      } catch (e) {
        if (!(e instanceof NonFiniteLogitsError) || !/first at token id \d+\) at position 42/.test(e.message)) failures.push(`n=${n}: wrong error ${String(e)}`);
      }
    }
  }
}
process.stdout.write(JSON.stringify({ isa: nativeKernels().isaLevel(), cases, failures }) + '\n');
