// Evacuate and restore from the machine page (run by TestConsoleEvacuatesAndRestores): the
// confirm dialog shows the plan with each instance's fate, the progress arrives live on
// the Maintenance card, and the phase follows Incus.
import { axe, clean, confirmPlanned, dialog, expect, launch, log, newPage, shot, signIn } from './lib.mjs';

const { BASE, ADMIN_TOKEN, SHOTS, MEMBER, INSTANCES } = process.env;
const phaseIs = (page, phase, timeout = 60000) => page.locator(`.title-row [data-phase="${phase}"]`).waitFor({ timeout });

const browser = await launch();
try {
  const { page } = await newPage(browser, BASE);
  await signIn(page, ADMIN_TOKEN);
  await page.goto('/machines/' + MEMBER);
  await page.locator('.title-row [data-phase]').waitFor();

  log('step: evacuate, the plan lists the instances and their fate');
  await page.locator('[data-action="evacuate"]').click();
  await dialog(page).locator(`table[data-instances="${INSTANCES}"]`).waitFor();
  const fates = await dialog(page).locator('tr[data-fate]').evaluateAll((rows) => rows.map((r) => r.dataset.fate));
  expect(fates.length === Number(INSTANCES) && fates.every((f) => f === 'MOVE'), `planned fates: ${fates}`);
  await dialog(page).locator('[data-targets="1"]').waitFor();
  await shot(page, SHOTS, '01-evacuate-plan');
  await axe(page, 'evacuate dialog');
  await confirmPlanned(page);

  log('step: progress pushed live, then EVACUATED');
  await page.locator('.maintenance [data-kind="SUCCEEDED"]').waitFor({ timeout: 60000 });
  const lines = await page.locator('.maintenance [data-kind]').allTextContents();
  log('progress:', lines.join(' | '));
  expect(lines.filter((l) => l.includes('moved to')).length === Number(INSTANCES), `progress lines: ${lines.join(' | ')}`);
  await phaseIs(page, 'EVACUATED');
  await shot(page, SHOTS, '02-evacuated');

  log('step: restore (the checks run first), then back');
  await page.locator('[data-action="restore"]').click();
  await dialog(page).locator(`table[data-instances="${INSTANCES}"]`).waitFor();
  await confirmPlanned(page);
  await page.locator('.maintenance [data-kind="STARTED"]').waitFor();
  await page.locator('.maintenance [data-kind="SUCCEEDED"]').waitFor({ timeout: 60000 });
  await page.waitForFunction(() => document.querySelector('.title-row [data-phase]')?.dataset.phase !== 'EVACUATED', null, { timeout: 60000 });
  await page.locator('.maintenance [data-operation]').nth(1).waitFor();
  await shot(page, SHOTS, '03-restored');
  await clean(page, 'machine page');
} finally {
  await browser.close();
}
