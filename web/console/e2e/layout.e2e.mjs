// Every page at 1280×800 with the longest values the server accepts (run by
// TestConsoleLayoutHoldsRealText): 63-character names everywhere (machines, members, MAAS
// hosts, zones, tags, profiles, identities), 1,024-character descriptions, a long
// maintenance message with a URL. No page is wider than the window, nothing is cut off in
// a box, and every action button is on screen. Each page's findings are gathered, so one
// run names every page that breaks.
import { axe, clean, dialog, launch, layoutProblems, log, newPage, shot, signIn } from './lib.mjs';

const { BASE, ADMIN_TOKEN, VIEWER_TOKEN, SHOTS, MEMBER, REGISTERED, DISCOVERED, MANUAL, PROFILE, OPERATOR, VIEWER } = process.env;
const manual = MANUAL.split(',');
const viewport = { width: 1280, height: 800 };
const found = [];

const browser = await launch();
try {
  const { page } = await newPage(browser, BASE, viewport);
  const check = async (where) => {
    // Loaded: nothing says Loading, and the page's own data is in.
    await page.waitForFunction(() => document.querySelectorAll('.loading').length === 0, null, { timeout: 30000 });
    await shot(page, SHOTS, 'layout-' + where.replace(/[^a-z0-9]+/gi, '-'));
    const p = await layoutProblems(page);
    log(`${where}: ${p.length ? p.length + ' problem(s)' : 'holds'}`);
    for (const x of p) found.push(`${where}: ${x}`);
  };
  await page.goto('/');
  await check('sign-in');
  await signIn(page, ADMIN_TOKEN);
  await page.getByText(OPERATOR, { exact: false }).first().waitFor();

  log('step: fleet');
  await page.locator(`tr[data-machine="${MEMBER}"]`).waitFor();
  await page.locator(`tr[data-machine="${DISCOVERED}"]`).waitFor();
  await check('fleet');
  await page.locator(`[data-select="${manual[0]}"]`).click();
  await page.locator(`[data-select="${DISCOVERED}"]`).click();
  await page.locator('[data-bulk-bar="2"]').waitFor();
  await check('fleet with a selection');
  await page.locator('[data-bulk-step]').selectOption('admit');
  await page.locator('[data-bulk-open]').click();
  await dialog(page).locator('[data-bulk-plan]').waitFor({ timeout: 30000 });
  await dialog(page).locator('[data-bulk-plans] summary').click();
  await check('bulk dialog');
  await dialog(page).getByRole('button', { name: 'Cancel' }).click();
  await page.locator('[data-bulk-clear]').click();

  log('step: machine pages');
  for (const tab of ['overview', 'admission', 'hardware', 'fencing', 'history']) {
    await page.goto(`/machines/${REGISTERED}${tab === 'overview' ? '' : '?tab=' + tab}`);
    await page.locator('.title-row [data-phase]').waitFor();
    if (tab === 'hardware') await page.locator('[data-tab-panel="hardware"] .facts dl').first().waitFor();
    if (tab === 'history') await page.locator('[data-tab-panel="history"] tr[data-audit-action]').first().waitFor();
    await check(`machine (MAAS) ${tab}`);
  }
  await page.goto(`/machines/${MEMBER}`);
  await page.locator('.maintenance [data-task]').waitFor();
  await check('machine (member) with a failed evacuation');
  await page.locator('[data-tab="fencing"]').click();
  await check('machine (member) fencing');
  await page.goto(`/machines/${manual[1]}`);
  await page.locator('.title-row [data-phase="AWAITING_JOIN"]').waitFor();
  await check('machine awaiting its join');
  await page.goto(`/machines/${DISCOVERED}`);
  await page.locator('.title-row [data-phase="DISCOVERED"]').waitFor();
  await check('machine discovered');

  log('step: dialogs');
  await page.goto(`/machines/${MEMBER}`);
  await page.locator('.actions [data-action="remove"]').click();
  await dialog(page).locator('[data-confirm][data-planned]').waitFor();
  await check('remove dialog');
  await dialog(page).getByRole('button', { name: 'Cancel' }).click();
  await page.goto(`/machines/${manual[0]}`);
  await page.locator('.actions [data-action="approve"]').click();
  await dialog(page).locator('[data-confirm][data-planned]').waitFor();
  await dialog(page).locator('[data-add-config]').click();
  await check('approve dialog');
  await dialog(page).getByRole('button', { name: 'Cancel' }).click();
  await page.goto(`/machines/${REGISTERED}`);
  await page.locator('.actions [data-action="release"]').click();
  await dialog(page).locator('[data-confirm][data-planned]').waitFor();
  await check('release dialog');
  await dialog(page).getByRole('button', { name: 'Cancel' }).click();

  for (const [path, ready, name] of [
    ['/enrolment', `[data-section] tr[data-machine="${MEMBER}"]`, 'enrolment'],
    ['/fencing', `tr[data-member="${MEMBER}"]`, 'fencing'],
    ['/rolling', '[data-rolling]', 'rolling reboots'],
    ['/clusters', 'tr[data-cluster] [data-member]', 'clusters'],
    ['/hardware', `tr[data-profile="${PROFILE}"]`, 'hardware profiles'],
    ['/identities', `tr[data-identity="${OPERATOR}"]`, 'identities'],
    ['/audit', 'tr[data-audit-action]', 'audit'],
  ]) {
    log(`step: ${name}`);
    await page.goto(path);
    await page.locator(ready).first().waitFor({ timeout: 30000 });
    await check(name);
  }
  await axe(page, 'audit with long values');
  await clean(page, 'layout');

  log('step: a viewer (no manage-infrastructure): every action disabled, with its reason');
  const v = await newPage(browser, BASE, viewport);
  await signIn(v.page, VIEWER_TOKEN);
  await v.page.getByText(VIEWER, { exact: false }).first().waitFor();
  await v.page.locator(`tr[data-machine="${MEMBER}"]`).waitFor();
  const vp = await layoutProblems(v.page);
  for (const x of vp) found.push(`viewer fleet: ${x}`);
  await shot(v.page, SHOTS, 'layout-viewer-fleet', false);
  await v.page.goto(`/machines/${MEMBER}`);
  await v.page.locator('.title-row [data-phase]').waitFor();
  for (const x of await layoutProblems(v.page)) found.push(`viewer machine: ${x}`);
  await shot(v.page, SHOTS, 'layout-viewer-machine', false);
  await v.context.close();

  if (found.length) throw new Error(`the layout breaks at 1280×800 with the longest values:\n${found.join('\n')}`);
  log('layout with the longest values: all pages hold');
} finally {
  await browser.close();
}
