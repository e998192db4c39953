// Evacuate and restore from the machine page (run by TestConsoleEvacuatesAndRestores): the
// confirm dialog shows the plan with each instance's fate, the progress arrives live on
// the Maintenance card, and the phase follows Incus.
import { axe, clean, confirmPlanned, dialog, expect, launch, log, newPage, shot, signIn } from './lib.mjs';

const { BASE, ADMIN_TOKEN, SHOTS, MEMBER, INSTANCES, OTHER, CONTROL } = process.env;
const control = async (path) => {
  const r = await fetch(CONTROL + path, { method: 'POST' });
  expect(r.ok, `control ${path}: ${r.status} ${await r.text()}`);
};
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
  await page.locator('.maintenance [data-task]').nth(1).waitFor();
  await shot(page, SHOTS, '03-restored');
  await clean(page, 'machine page');

  log('step: a member with no machine record, evacuated with incus, is offered Restore too');
  await control('/evacuate-other');
  await page.goto('/machines/' + OTHER);
  await page.locator('.title-row [data-phase="UNREGISTERED"]').waitFor();
  await page.locator('[aria-label="Incus member"]', { hasText: 'Evacuated' }).waitFor({ timeout: 30000 });
  const restore = page.locator('.actions [data-action="restore"]');
  await restore.waitFor({ timeout: 30000 });
  expect((await page.locator('.actions [data-action="evacuate"], .actions [data-action="admit"]').count()) === 0, 'an evacuated member is offered neither Evacuate nor Admit');
  await shot(page, SHOTS, '04-unregistered-evacuated');
  await axe(page, 'evacuated member without a record');
  await restore.click();
  await dialog(page).locator('[data-instances="0"]').waitFor();
  await confirmPlanned(page);
  await page.locator('[aria-label="Incus member"]', { hasText: 'Online' }).waitFor({ timeout: 60000 });
  await page.locator('.actions [data-action="evacuate"]').waitFor({ timeout: 30000 });
  await shot(page, SHOTS, '05-unregistered-restored');
  await clean(page, 'restore without a record');
} finally {
  await browser.close();
}
