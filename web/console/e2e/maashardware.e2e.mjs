// The machine page's MAAS hardware tab (run by TestConsoleShowsMAASHardware): storage,
// interfaces and script results from MAAS, "unknown" where MAAS measured nothing, empty
// states for a machine never commissioned, and the failed script marked; axe in both themes.
import { axe, clean, expect, launch, log, newPage, shot, signIn } from './lib.mjs';

const { BASE, ADMIN_TOKEN, SHOTS } = process.env;

const browser = await launch();
try {
  const { page } = await newPage(browser, BASE);
  await signIn(page, ADMIN_TOKEN);

  log('step: a tested machine: its disks, interfaces and scripts, the failed one marked');
  await page.goto('/machines/node-a?tab=hardware');
  const panel = page.locator('[data-tab-panel="hardware"]');
  await panel.locator('tr.script-failed').waitFor({ timeout: 30000 });
  const storage = await page.locator('section[aria-labelledby="maas-storage"]').innerText();
  expect(storage.includes('nvme0n1') && storage.includes('PM9A3') && storage.includes('3.84 TB'), 'the disks MAAS found: ' + storage);
  const nics = await page.locator('section[aria-labelledby="maas-interfaces"]').innerText();
  expect(nics.includes('25 Gbit/s') && nics.includes('fabric-1 / 120'), 'a connected interface with its speed and VLAN: ' + nics);
  const down = await page.locator('section[aria-labelledby="maas-interfaces"] tbody tr').nth(1).innerText();
  expect(down.includes('no link') && down.includes('unknown') && !/\b0 (Mbit|Gbit)/.test(down), 'a link without speed reads unknown, not 0: ' + down);
  const failed = page.locator('tr.script-failed');
  expect((await failed.count()) === 1, `one failed script row, not ${await failed.count()}`);
  const failedText = await failed.innerText();
  expect(failedText.includes('stress-ng-cpu-short') && failedText.includes('✕ Failed') && failedText.includes('4 min'), 'the failed script, marked not by colour alone: ' + failedText);
  const note = await page.locator('section[aria-labelledby="maas-scripts"] [role="note"]').innerText();
  expect(note.includes('1 script failed: stress-ng-cpu-short'), 'the failure is named above the table: ' + note);
  const passed = await page.locator('section[aria-labelledby="maas-scripts"] tbody tr:not(.script-failed)').count();
  expect(passed === 2, `commissioning and smartctl-validate passed rows: ${passed}`);
  await shot(page, SHOTS, '01-maas-hardware-tested');
  await axe(page, 'machine MAAS hardware tables');

  log('step: a machine MAAS never commissioned: clear empty states');
  await page.goto('/machines/node-new?tab=hardware');
  await page.locator('section[aria-labelledby="maas-scripts"] p.muted').waitFor({ timeout: 30000 });
  const emptyStorage = await page.locator('section[aria-labelledby="maas-storage"]').innerText();
  expect(emptyStorage.includes('No storage inventoried') && emptyStorage.includes('once it has commissioned it'), 'empty storage says why: ' + emptyStorage);
  const scripts = await page.locator('section[aria-labelledby="maas-scripts"]').innerText();
  expect(scripts.includes('has not commissioned or tested this machine yet'), 'no scripts yet: ' + scripts);
  const boot = await page.locator('section[aria-labelledby="maas-interfaces"] tbody tr').innerText();
  expect(boot.includes('unknown'), 'the boot interface before commissioning: speeds unknown: ' + boot);
  await shot(page, SHOTS, '02-maas-hardware-new');
  await axe(page, 'machine MAAS hardware empty');
  await clean(page, 'MAAS hardware tab');
} finally {
  await browser.close();
}
