import { simulateRequest } from '../../engine/plan/api';
import { launchChromium } from './browser';
import { startHarness } from './harness';
import { openView, postData } from './views';
void (async () => {
const sim = simulateRequest({ model: 'llama-3.1-8b:Q4_K', hardware: 'rtx4060-laptop-8gb+ryzen9-7950x', workload: 'batch=1,prompt=8192,gen=64,vram=4G', policy: 'split-points', trace: true });
const h = await startHarness('/work/wt-13/dist/webviews');
const b = await launchChromium();
for (const theme of ['dark'] as const) {
  const v = await openView(b, h, 'timeline', theme, 900, 700);
  await postData(v.page, { predicted: sim.trace, title: 'x' });
  await v.page.locator('#timeline').waitFor();
  await v.page.screenshot({ path: `/tmp/wt13-tl-${theme}.png`, fullPage: true });
  await v.page.click('#zoom-in'); await v.page.click('#zoom-in');await v.page.click('#zoom-in');
  await v.page.screenshot({ path: `/tmp/wt13-tl2-${theme}.png`, fullPage: true });
  console.log(theme, v.cspViolations, v.pageErrors, sim.trace!.traceEvents.length);
}
await b.close(); await h.close();
})();
