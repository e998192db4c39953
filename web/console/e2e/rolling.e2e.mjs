// The Rolling reboots page (run by TestConsoleRollingReboot): start one through the
// confirm dialog's plan, then pause, resume and cancel it. No apelora-worker runs, so the
// rolling reboot waits at its first member's first stage and nothing races the buttons.
import { axe, clean, confirmPlanned, dialog, expect, launch, log, newPage, shot, signIn } from './lib.mjs';

const { BASE, ADMIN_TOKEN, SHOTS, MEMBER } = process.env;
// confirmAndClose confirms the dialog's plan and waits for the dialog to close.
const confirmAndClose = async (page) => {
  await confirmPlanned(page);
  await dialog(page).waitFor({ state: 'detached' });
};
const stateIs = (page, state) => page.locator(`[data-rolling][data-state="${state}"]`).waitFor({ timeout: 30000 });

const browser = await launch();
try {
  const { page } = await newPage(browser, BASE);
  await signIn(page, ADMIN_TOKEN);
  await page.goto('/rolling');
  await page.getByText('No rolling reboot yet.').waitFor();
  await axe(page, 'rolling reboots, none yet');

  log('step: start, members chosen in order, the plan shown first');
  await page.getByRole('button', { name: 'Start a rolling reboot' }).click();
  await dialog(page).getByLabel(MEMBER).check();
  await shot(page, SHOTS, '01-start-plan');
  await axe(page, 'start dialog');
  await confirmAndClose(page);
  await stateIs(page, 'RUNNING');
  const current = await page.locator(`[data-member="${MEMBER}"]`).getAttribute('aria-current');
  expect(current === 'step', `${MEMBER} is not the member in progress: ${current}`);
  await shot(page, SHOTS, '02-running');
  await axe(page, 'a running rolling reboot');

  for (const [button, state] of [['Pause', 'PAUSED'], ['Resume', 'RUNNING'], ['Cancel', 'CANCELLED']]) {
    log(`step: ${button}`);
    await page.locator('[data-rolling]').getByRole('button', { name: button }).click();
    await confirmAndClose(page);
    await stateIs(page, state);
  }
  const reason = await page.locator('[data-rolling] .banner').first().textContent();
  expect(reason && reason.includes('cancelled at ' + MEMBER), `cancel reason: ${reason}`);
  await shot(page, SHOTS, '03-cancelled');
  await clean(page, 'rolling reboots page');
} finally {
  await browser.close();
}
