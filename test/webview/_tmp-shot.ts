import path from 'node:path';
import { planRequest } from '../../engine/plan/api';
import { launchChromium } from '../../test/webview/browser';
import { startHarness } from '../../test/webview/harness';
import { openView, postData } from '../../test/webview/views';
void (async () => {
const plan = planRequest({ model: 'llama-3.1-8b:Q4_K', hardware: 'rtx4060-laptop-8gb+ryzen9-7950x', workload: 'batch=1,prompt=8192,gen=64,vram=4G' });
const h = await startHarness('/work/wt-13/dist/webviews');
const b = await launchChromium();
for (const theme of ['dark', 'light'] as const) {
  const v = await openView(b, h, 'plan', theme, 760, 900);
  await postData(v.page, { plan });
  await v.page.locator('#heatmap').waitFor();
  await v.page.keyboard.press('Tab'); 
  await v.page.screenshot({ path: `/tmp/wt13-plan-${theme}.png`, fullPage: true });
  console.log(theme, v.cspViolations, v.pageErrors);
}
await b.close(); await h.close();
})();
